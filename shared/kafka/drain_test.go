package kafka

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// handoverCore is a strand core for the topic "t" of two partitions, as
// far as Metadata and Produce need one. Submit acknowledges at once until
// the core's drain begins (after admit more submissions; admit < 0: never),
// then refuses as the strand server's drain does: unavailable with the
// Leader detail naming this star (server.ErrShuttingDown;
// TestDrainRefusalNamesThisStar there). Cores sharing a log are a star and
// its successor over the same streams.
type handoverCore struct {
	Core   // the calls these tests do not make (nil: they panic)
	star   string
	leader string // the star the streams name as leader
	log    *handoverLog

	mu      sync.Mutex
	admit   int
	refused int // submissions the drain refused
}

type handoverLog struct {
	mu   sync.Mutex
	next map[string]uint64 // stream -> records appended
}

func newHandoverCore(star string, log *handoverLog) *handoverCore {
	return &handoverCore{star: star, leader: star, log: log, admit: -1}
}

func (c *handoverCore) streams(prefix string) []*strandv1.Stream {
	var out []*strandv1.Stream
	for _, n := range []string{"t/0", "t/1"} {
		if strings.HasPrefix(n, prefix) {
			out = append(out, &strandv1.Stream{Name: n, Leader: c.leader})
		}
	}
	return out
}

func (c *handoverCore) ListStreams(_ context.Context, r *connect.Request[strandv1.ListStreamsRequest]) (*connect.Response[strandv1.ListStreamsResponse], error) {
	var out []*strandv1.Stream
	for _, st := range c.streams(r.Msg.Prefix) {
		if st.Name > r.Msg.StartAfter {
			out = append(out, st)
		}
	}
	return connect.NewResponse(&strandv1.ListStreamsResponse{Streams: out}), nil
}

func (c *handoverCore) GetStream(_ context.Context, r *connect.Request[strandv1.GetStreamRequest]) (*connect.Response[strandv1.GetStreamResponse], error) {
	for _, st := range c.streams("") {
		if st.Name == r.Msg.Name {
			return connect.NewResponse(&strandv1.GetStreamResponse{Stream: st}), nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no stream %q", r.Msg.Name))
}

func (c *handoverCore) Read(_ context.Context, r *connect.Request[strandv1.ReadRequest]) (*connect.Response[strandv1.ReadResponse], error) {
	c.log.mu.Lock()
	defer c.log.mu.Unlock()
	return connect.NewResponse(&strandv1.ReadResponse{NextSeqNum: c.log.next[r.Msg.Stream]}), nil // records are not kept
}

func (c *handoverCore) CheckTail(_ context.Context, r *connect.Request[strandv1.CheckTailRequest]) (*connect.Response[strandv1.CheckTailResponse], error) {
	c.log.mu.Lock()
	defer c.log.mu.Unlock()
	return connect.NewResponse(&strandv1.CheckTailResponse{NextSeqNum: c.log.next[r.Msg.Stream]}), nil
}

// leaderErr is the strand server's unavailable with the Leader detail.
func leaderErr(star string) error {
	ce := connect.NewError(connect.CodeUnavailable, fmt.Errorf("led by %s", star))
	d, err := connect.NewErrorDetail(&strandv1.Leader{Star: star})
	if err != nil {
		panic(err)
	}
	ce.AddDetail(d)
	return ce
}

func (c *handoverCore) Submit(_ context.Context, m *strandv1.AppendRequest) (func(context.Context) (*strandv1.AppendResponse, error), error) {
	c.mu.Lock()
	if c.admit == 0 {
		c.refused++
		c.mu.Unlock()
		return nil, leaderErr(c.star) // the drain: the server checks it first
	}
	if c.admit > 0 {
		c.admit--
	}
	c.mu.Unlock()
	if c.leader != c.star {
		return nil, leaderErr(c.leader)
	}
	c.log.mu.Lock()
	base := c.log.next[m.Stream]
	c.log.next[m.Stream] = base + uint64(len(m.Records))
	c.log.mu.Unlock()
	a := &strandv1.AppendResponse{StartSeqNum: base, EndSeqNum: base + uint64(len(m.Records))}
	return func(context.Context) (*strandv1.AppendResponse, error) { return a, nil }, nil
}

// drainAfter begins the drain after n more submissions.
func (c *handoverCore) drainAfter(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.admit = n
}

func (c *handoverCore) refusals() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// serveFront runs a front end for core on addr ("": a free port) and
// returns it and its address.
func serveFront(t *testing.T, core *handoverCore, addr string) (*Server, string) {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	// The address a closed front end held is free again at once
	// (SO_REUSEADDR); retry briefly all the same, as a standby does.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ln, err = net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Core: core, Star: core.star})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

// produceV7 is a Produce (version 7, acks all) of one batch of the sample
// records to each partition of "t" given.
func produceV7(parts ...int32) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 7, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	for _, p := range parts {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rp.Records = rawBatch(0, 3, encodeRecords(sampleRecords()), -1, -1)
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

func sendRaw(t *testing.T, c net.Conn, corr int32, r kmsg.Request) {
	t.Helper()
	if _, err := c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, r, corr)); err != nil {
		t.Fatal(err)
	}
}

// readProduce reads a Produce v7 response (not flexible) within wait.
func readProduce(c net.Conn, wait time.Duration) (int32, *kmsg.ProduceResponse, error) {
	c.SetReadDeadline(time.Now().Add(wait))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil || len(body) < 4 {
		return 0, nil, fmt.Errorf("response body: %v", err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 7
	return int32(binary.BigEndian.Uint32(body)), resp, resp.ReadFrom(body[4:])
}

// TestDrainHangsUpProduce: a produce the drain refused whole (nothing
// written) gets no answer; its connection closes, with no response, when
// the front end closes, so a client retries it after a reconnect rather
// than after a metadata refresh (ADR 0071; before, it was answered
// NOT_LEADER_FOR_PARTITION at once, and this failed). A produce the drain
// refused in part (a partition admitted before it began) is answered at
// once, the refused partition REQUEST_TIMED_OUT (retried without a
// metadata refresh); one for a partition another star leads is answered
// NOT_LEADER_FOR_PARTITION, as before.
func TestDrainHangsUpProduce(t *testing.T) {
	other := newHandoverCore("s1", &handoverLog{next: map[string]uint64{}})
	other.leader = "s2"
	_, addr := serveFront(t, other, "")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sendRaw(t, c, 1, produceV7(0))
	if _, resp, err := readProduce(c, 5*time.Second); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a produce to a partition star s2 leads: %+v %v, want NOT_LEADER_FOR_PARTITION at once", resp, err)
	}

	core := newHandoverCore("s1", &handoverLog{next: map[string]uint64{}})
	core.drainAfter(1) // between the request's two partitions
	s, addr := serveFront(t, core, "")
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sendRaw(t, c, 1, produceV7(0, 1))
	corr, resp, err := readProduce(c, 5*time.Second)
	if err != nil || corr != 1 {
		t.Fatalf("a produce refused in part: correlation %d, %v; want its answer at once", corr, err)
	}
	ps := resp.Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[0].BaseOffset != 0 || ps[1].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("a produce refused in part: %+v, want partition 0 at offset 0 and partition 1 REQUEST_TIMED_OUT", ps)
	}

	sendRaw(t, c, 2, produceV7(0))
	sendRaw(t, c, 3, produceV7(1))
	if corr, _, err := readProduce(c, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a produce the drain refused whole was answered (correlation %d, %v); want no answer until the front end closes", corr, err)
	}
	if n := core.refusals(); n != 3 {
		t.Fatalf("the drain refused %d submissions, want 3 (partition 1, then both produces)", n)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	if corr, _, err := readProduce(c, 5*time.Second); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after the front end closed: correlation %d, %v; want the connection closed with no response", corr, err)
	}
	<-closed
	core.log.mu.Lock()
	defer core.log.mu.Unlock()
	if core.log.next["t/0"] != 3 || core.log.next["t/1"] != 0 {
		t.Fatalf("appended %v, want the 3 records partition 0 admitted and nothing else", core.log.next)
	}
}

// TestDrainHandoverKgoDefaults: a kgo producer with its default settings
// (MetadataMinAge 5 s) through a handover: the leader drains, its front
// end closes 300 ms later and a successor serves the same address. A
// produce of one record to each of two partitions, sent as one request,
// the drain refusing it whole or after admitting partition 0, is
// acknowledged by the successor well before kgo's next metadata refresh
// could be made, each record written once. Before ADR 0071 the drain's
// NOT_LEADER_FOR_PARTITION made kgo wait out its 5 s metadata min age
// since its first metadata request, and this failed.
func TestDrainHandoverKgoDefaults(t *testing.T) {
	for _, admit := range []int{0, 1} {
		t.Run(fmt.Sprintf("admitted %d", admit), func(t *testing.T) {
			log := &handoverLog{next: map[string]uint64{}}
			leader := newHandoverCore("s1", log)
			s, addr := serveFront(t, leader, "")
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ManualFlushing())
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// produce sends one record to each partition in one request.
			produce := func(v string) error {
				var wg sync.WaitGroup
				var mu sync.Mutex
				var first error
				for p := range int32(2) {
					wg.Add(1)
					cl.Produce(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte(v)}, func(_ *kgo.Record, err error) {
						mu.Lock()
						first = cmp.Or(first, err)
						mu.Unlock()
						wg.Done()
					})
				}
				if err := cl.Flush(ctx); err != nil {
					return err
				}
				wg.Wait()
				return first
			}
			if err := produce("before"); err != nil {
				t.Fatal(err)
			}

			leader.drainAfter(admit)
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- produce("during") }()
			time.Sleep(300 * time.Millisecond)
			if leader.refusals() == 0 {
				t.Fatal("the producer sent nothing to the draining leader in 300 ms")
			}
			s.Close()
			serveFront(t, newHandoverCore("s1", log), addr)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("the produce the drain refused took %s to be acknowledged, want under 2 s (300 ms of it the drain)", took.Round(time.Millisecond))
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if log.next["t/0"] != 2 || log.next["t/1"] != 2 {
				t.Fatalf("the partitions hold %v records, want 2 each (each record once)", log.next)
			}
		})
	}
}

// fetchT is a Fetch (version 4) of partition 0 of "t" from offset 0.
func fetchT(maxBytes, partMax int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes = 4, maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = partMax
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestCloseHangsUpFetch: a fetch that Close cut short (its long poll,
// or its reads, ended by the front end's context) gets no answer, so a
// client does not act on the cut's errors and fetches again after a
// reconnect (ADR 0071; before, it was answered, and this failed).
func TestCloseHangsUpFetch(t *testing.T) {
	s, _ := serveFront(t, newHandoverCore("s1", &handoverLog{next: map[string]uint64{}}), "")
	req := fetchT(1<<20, 1<<20)
	req.MaxWaitMillis, req.MinBytes = 10_000, 1
	cn := &conn{s: s, remote: "test", ctx: s.ctx, stop: s.ctx, authed: true}
	got := make(chan kmsg.Response, 1)
	go func() {
		resp, err := cn.handleNow(&request{kreq: req})
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	select {
	case resp := <-got:
		t.Fatalf("a fetch with nothing to read answered before its wait: %+v", resp)
	case <-time.After(100 * time.Millisecond):
	}
	s.Close()
	select {
	case resp := <-got:
		if resp != hangUp {
			t.Fatalf("a fetch cut by Close was answered %+v, want the connection closed instead", resp)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a fetch still waits 5 s after Close")
	}
}
