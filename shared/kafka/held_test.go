package kafka

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metrics"
)

// holdCore is a handoverCore whose appends to t/0 are acknowledged only
// once release is closed; it counts them.
type holdCore struct {
	*handoverCore
	release chan struct{}
	mu      sync.Mutex
	held    int // appends to t/0 submitted
}

func (c *holdCore) Submit(ctx context.Context, m *strandv1.AppendRequest) (func(context.Context) (*strandv1.AppendResponse, error), error) {
	if m.Stream != "t/0" {
		return c.handoverCore.Submit(ctx, m)
	}
	c.mu.Lock()
	c.held++
	c.mu.Unlock()
	return func(context.Context) (*strandv1.AppendResponse, error) {
		<-c.release
		return &strandv1.AppendResponse{}, nil
	}, nil
}

func (c *holdCore) submitted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// exchange sends r on c and reads its answer into resp (not flexible).
func exchange(t *testing.T, c net.Conn, corr int32, r kmsg.Request, resp kmsg.Response) {
	t.Helper()
	sendRaw(t, c, corr, r)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	resp.SetVersion(r.GetVersion())
	if err := resp.ReadFrom(body[4:]); err != nil {
		t.Fatal(err)
	}
}

// saslDial opens a connection authenticated with token (SASL/PLAIN).
func saslDial(t *testing.T, addr, token string) net.Conn {
	t.Helper()
	c, code := saslCode(t, addr, token)
	if code != 0 {
		t.Fatalf("SASL: error %d", code)
	}
	return c
}

// bigProduce is a Produce v7 (acks all) of one record of n bytes to
// partition p of "t".
func bigProduce(p int32, n int) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.TimeoutMillis = 7, -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = rawBatch(0, 1, encodeRecords([]Record{{Value: bytes.Repeat([]byte("v"), n), Timestamp: 1000}}), -1, -1)
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

// TestHeldBytesBounded (ADR 0074): tenant A opens 8 connections and
// pipelines 34 produces of 256 KiB on each, whose acks never come (its
// partition's appends are held). The front end holds at most its share
// of the held budget (half of 4 MiB: 8 such produces), not 8 x 34, and
// stops reading A's connections; the budget is never exceeded; and
// tenant B's produce on another connection is answered at once. It
// failed before: 272 produces were read and submitted, 68 MiB held.
func TestHeldBytesBounded(t *testing.T) {
	const conns, perConn, size, budget = 8, maxPipelined + 2, 256 << 10, 4 << 20
	ctx := context.Background()
	meta := metastore.NewMem()
	issue := func() string {
		tok, err := auth.NewToken(crand.Reader)
		if err == nil {
			err = auth.Issue(ctx, meta, tok, "t/", []auth.Op{auth.Append, auth.Read})
		}
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tokA, tokB := issue(), issue() // two root tokens: two tenants
	core := &holdCore{handoverCore: newHandoverCore("s1", &handoverLog{next: map[string]uint64{}}), release: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Core: core, Star: "s1", Auth: &auth.Checker{Meta: meta}, Limits: Limits{MaxHeldBytes: budget}})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	defer close(core.release) // before Close: the held answers end
	addr := ln.Addr().String()

	req := appendRequest(bigProduce(0, size), 0)
	var wg sync.WaitGroup
	for range conns {
		c := saslDial(t, addr, tokA)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perConn {
				c.SetWriteDeadline(time.Now().Add(2 * time.Second)) // the server stops reading: give up then
				binary.BigEndian.PutUint32(req[8:], uint32(k))
				if _, err := c.Write(req); err != nil {
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(3 * time.Second)
	for last := -1; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		n := core.submitted()
		if n == last && n > 0 {
			break
		}
		last = n
	}
	held := core.submitted()
	share := budget / 2 / len(req)
	t.Logf("tenant A: %d produces of %d bytes held on %d connections (%d sent on each); its share fits %d", held, len(req), conns, perConn, share)
	if held > share || held < share-1 {
		t.Fatalf("tenant A holds %d produces of %d bytes: want its share of the %d-byte budget, %d", held, len(req), budget, share)
	}
	s.held.mu.Lock()
	peak := s.held.peak
	s.held.mu.Unlock()
	if peak > budget {
		t.Fatalf("the front end held %d bytes at once, over its budget of %d", peak, budget)
	}
	// Tenant B still produces.
	b := saslDial(t, addr, tokB)
	start := time.Now()
	pr := kmsg.NewPtrProduceResponse()
	exchange(t, b, 7, bigProduce(1, size), pr)
	if code := pr.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("tenant B's produce while A holds its share: error %d", code)
	}
	t.Logf("tenant B's produce answered in %s", time.Since(start))
	wg.Wait()
}

// recordsCore is a handoverCore whose streams hold 64 records of 16 KiB.
type recordsCore struct{ *handoverCore }

func (c recordsCore) Read(_ context.Context, r *connect.Request[strandv1.ReadRequest]) (*connect.Response[strandv1.ReadResponse], error) {
	const tail, size = 64, 16 << 10
	res := &strandv1.ReadResponse{NextSeqNum: tail}
	for seq := r.Msg.GetSeqNum(); seq < tail && uint64(len(res.Records))*size < max(r.Msg.Bytes, 1); seq++ {
		res.Records = append(res.Records, &strandv1.SequencedRecord{SeqNum: seq, TimestampMs: 1000, Body: make([]byte, size)})
	}
	return connect.NewResponse(res), nil
}

// TestFetchAnswerHeld (ADR 0074): a Fetch's answer is held until it is
// written, so its bytes are in the held budget from the fetch until then
// (its bound taken first, what it did not fill given back), and it is at
// most MaxFetchBytes (and one record) whatever the request's MaxBytes.
// It failed before: the answer's 1 MiB was not counted at all.
func TestFetchAnswerHeld(t *testing.T) {
	const capBytes = 128 << 10
	s, err := New(Config{Core: recordsCore{newHandoverCore("s1", &handoverLog{next: map[string]uint64{}})}, Star: "s1",
		Limits: Limits{MaxHeldBytes: 4 << 20, MaxFetchBytes: capBytes}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := fetchT(100<<20, 100<<20)
	cn := &conn{s: s, remote: "test", ctx: s.ctx, stop: s.ctx, authed: true}
	r := &request{kreq: req, tenant: "a"}
	resp, err := cn.handleNow(r)
	if err != nil {
		t.Fatal(err)
	}
	got := fetchedBytes(resp)
	s.held.mu.Lock()
	cur := s.held.cur
	s.held.mu.Unlock()
	t.Logf("a fetch of 100 MiB: %d bytes answered, %d held for it", got, r.held)
	// The last batch may pass the bound (a fetch returns whole records);
	// what passes it is not counted.
	if want := min(got, capBytes); got == 0 || got > capBytes+17<<10 || r.held != want || cur != want {
		t.Fatalf("a fetch answered %d bytes (cap %d); its request holds %d and the budget %d, want both %d", got, capBytes, r.held, cur, want)
	}
	s.held.put(r.tenant, r.held) // as the writer does once it is written
	if s.held.cur != 0 {
		t.Fatalf("the budget holds %d after the answer is written", s.held.cur)
	}
}

// TestStrangersCannotCrowdOutTenants (ADR 0074): one tenant holding its
// half and a flood of unauthenticated connections holding all they may
// leave room for another tenant's request. Before, the unauthenticated
// connections together had half as well, so the two held the whole budget
// and tenant B waited.
func TestStrangersCannotCrowdOutTenants(t *testing.T) {
	const budget, preAuth = 256 << 20, 1 << 20
	gauge := func() *metrics.Gauge { return metrics.NewRegistry().Gauge("held", "test") }
	b := newHeldBudget(budget, preAuth, gauge())
	try := func(tenant string, n int64) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		return b.take(ctx, tenant, b.charge(tenant, n)) == nil
	}
	for try("a", 1<<20) {
	}
	strangers := 0
	for try(unauthenticated, preAuth) {
		strangers++
	}
	if strangers == 0 {
		t.Fatal("the unauthenticated connections cannot hold one largest request before SASL")
	}
	if !try("b", 8<<20) {
		t.Fatalf("tenant b cannot take 8 MiB of a %d-byte budget: a holds %d, the unauthenticated %d", budget, b.by["a"], b.by[unauthenticated])
	}
	if got := b.by[unauthenticated]; got > budget/16 {
		t.Fatalf("the unauthenticated hold %d bytes, over their sixteenth (%d)", got, budget/16)
	}
	// A tiny budget still admits one pre-auth request.
	small := newHeldBudget(1<<20, preAuth, gauge())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := small.take(ctx, unauthenticated, small.charge(unauthenticated, preAuth)); err != nil {
		t.Fatalf("a 1 MiB budget refuses one pre-auth request: %v", err)
	}
}
