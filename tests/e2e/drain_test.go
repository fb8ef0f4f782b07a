package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/tests/testproc"
)

const (
	drainStreams = 6 // half Standard, half Express; one producer each
	drainReaders = 3 // tailing readers, on streams 0..2
	drainBatch   = 20
	drainBudget  = 10 * time.Second
	drainBefore  = 3000 // acked records before SIGTERM
	drainAfter   = 3000 // acked records after the successor serves
	drainMsg     = "draining for shutdown"
)

// observed is what the clients of the drain test saw, checked against the
// records they sent, never against the server's own state.
type observed struct {
	mu sync.Mutex
	// bad are errors that are not unavailable: a well-behaved client would
	// give up on them.
	bad []error
	// drained counts, per producer or reader, the session ends that were
	// unavailable and said the server was draining.
	drained map[string]int
	acks    []time.Time // when each ack arrived
	tails   []time.Time // when each tailed batch arrived
	acked   atomic.Int64
}

func (o *observed) end(who string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		o.bad = append(o.bad, fmt.Errorf("%s: session ended without an error", who))
	case connect.CodeOf(err) != connect.CodeUnavailable:
		o.bad = append(o.bad, fmt.Errorf("%s: %w", who, err))
	case strings.Contains(err.Error(), drainMsg):
		o.drained[who]++
	}
}

func (o *observed) at(list *[]time.Time) {
	o.mu.Lock()
	*list = append(*list, time.Now())
	o.mu.Unlock()
}

// gap is the longest pause between consecutive times in list that ends
// after from (-1 if nothing came after it).
func gap(list []time.Time, from time.Time) time.Duration {
	ts := slices.SortedFunc(slices.Values(list), func(a, b time.Time) int { return a.Compare(b) })
	longest := time.Duration(-1)
	for i := 1; i < len(ts); i++ {
		if ts[i].After(from) {
			longest = max(longest, ts[i].Sub(ts[i-1]))
		}
	}
	return longest
}

// drainProducer appends to name through append sessions until stop, each
// batch's bodies naming the seqs it is due to get; after a session ends it
// reopens at the stream's tail, as a client resuming after unavailable
// does. ackedTo is the end of the acknowledged prefix.
func drainProducer(ctx context.Context, c *client.Client, name string, o *observed, ackedTo *atomic.Uint64, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		err := produceOnce(ctx, c, name, o, ackedTo, stop)
		if errors.Is(err, errStopped) {
			return
		}
		o.end("producer "+name, err)
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var errStopped = errors.New("stopped")

func produceOnce(ctx context.Context, c *client.Client, name string, o *observed, ackedTo *atomic.Uint64, stop <-chan struct{}) error {
	tail, err := c.CheckTail(ctx, name)
	if err != nil {
		return err
	}
	if tail.NextSeq < ackedTo.Load() {
		return fmt.Errorf("%s: tail %d below the %d acknowledged records: %w", name, tail.NextSeq, ackedTo.Load(), errLost)
	}
	sess, err := c.OpenAppendSession(ctx, name)
	if err != nil {
		return err
	}
	defer sess.Close()
	go func() {
		next := tail.NextSeq
		for {
			select {
			case <-stop:
				_ = sess.CloseSend()
				return
			default:
			}
			var recs []client.Record
			for i := range uint64(drainBatch) {
				recs = append(recs, client.Record{Body: []byte(body(name, next+i))})
			}
			if sess.Submit(recs, client.AppendOptions{}) != nil {
				return // the session's end comes through Acks
			}
			next += drainBatch
		}
	}()
	for a := range sess.Acks() {
		if a.Err != nil {
			return a.Err
		}
		ackedTo.Store(a.EndSeq)
		o.acked.Add(int64(a.EndSeq - a.StartSeq))
		o.at(&o.acks)
	}
	return errStopped // CloseSend after stop: every ack received
}

var errLost = errors.New("acknowledged records lost")

// drainReader tails name from seq 0 until stop, checking every record,
// and resumes at the next seq after a session ends.
func drainReader(ctx context.Context, c *client.Client, name string, o *observed, stop <-chan struct{}) {
	var next uint64
	who := "reader " + name
	for {
		select {
		case <-stop:
			return
		default:
		}
		rs, err := c.OpenReadSession(ctx, name, client.FromSeq(next), client.SessionOptions{Heartbeat: time.Second})
		if err == nil {
			for rs.Next() {
				b := rs.Batch()
				for _, r := range b.Records {
					if r.Seq != next || string(r.Body) != body(name, r.Seq) {
						o.mu.Lock()
						o.bad = append(o.bad, fmt.Errorf("%s: seq %d body %q, want seq %d", who, r.Seq, r.Body, next))
						o.mu.Unlock()
						rs.Close()
						return
					}
					next++
				}
				if len(b.Records) > 0 {
					o.at(&o.tails)
				}
				select {
				case <-stop:
					rs.Close()
					return
				default:
				}
			}
			err = rs.Err()
			rs.Close()
		}
		o.end(who, err)
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDevDrainsOnSIGTERM runs `strand dev` under load (a producer per
// stream through append sessions, tailing readers), sends SIGTERM, starts
// the successor on the same data, and checks what the clients saw: every
// session open at SIGTERM ended with unavailable saying the server was
// draining (and the client resumed), no error a client would treat as
// permanent, the process exited within its drain budget, and every
// acknowledged record reads back exactly as sent. It logs the pause in
// acks and in tail delivery (docs/operations.md, "Deploys and restarts").
// Regression test: it failed before the drain (sessions ended with
// invalid_argument "protocol error: incomplete envelope" when the process
// exited, after Close waited out its 5 s timeout).
func TestDevDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testproc.Build(t, "./cmd/strand")
	dataDir := filepath.Join(t.TempDir(), "data")
	addr := testproc.FreeAddr(t)
	endpoint := "http://" + addr
	d := startDev(t, bin, dataDir, addr, "--drain-budget", drainBudget.String())
	tokb, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(endpoint, client.WithToken(strings.TrimSpace(string(tokb))))
	if err != nil {
		t.Fatal(err)
	}
	for i := range drainStreams {
		class := []string{"standard", "express"}[i%2]
		if _, err := c.CreateStream(ctx, name(i), client.CreateOptions{Class: class}); err != nil {
			t.Fatal(err)
		}
	}
	o := &observed{drained: map[string]int{}}
	ackedTo := make([]atomic.Uint64, drainStreams)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range drainStreams {
		wg.Go(func() { drainProducer(ctx, c, name(i), o, &ackedTo[i], stop) })
	}
	for i := range drainReaders {
		wg.Go(func() { drainReader(ctx, c, name(i), o, stop) })
	}
	waitAcked := func(n int64) {
		t.Helper()
		for o.acked.Load() < n {
			if ctx.Err() != nil {
				t.Fatalf("only %d records acked, want %d", o.acked.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitAcked(drainBefore)

	term := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitErr := d.cmd.Wait()
	exited := time.Now()
	if waitErr != nil {
		t.Fatalf("strand dev exited with %v after SIGTERM, want a clean exit", waitErr)
	}
	if took := exited.Sub(term); took > drainBudget {
		t.Fatalf("strand dev took %s to exit after SIGTERM, over its %s drain budget", took, drainBudget)
	}
	atTerm := o.acked.Load()
	d = startDev(t, bin, dataDir, addr, "--drain-budget", drainBudget.String())
	serving := time.Now()
	waitAcked(atTerm + drainAfter)
	close(stop)
	wg.Wait()

	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.bad) > 0 {
		t.Fatalf("clients saw %d errors that are not unavailable, first: %v", len(o.bad), errors.Join(o.bad[:min(len(o.bad), 5)]...))
	}
	for i := range drainStreams {
		if o.drained["producer "+name(i)] == 0 {
			t.Errorf("producer %s: its session did not end with unavailable (draining)", name(i))
		}
	}
	for i := range drainReaders {
		if o.drained["reader "+name(i)] == 0 {
			t.Errorf("reader %s: its session did not end with unavailable (draining)", name(i))
		}
	}
	for i := range drainStreams {
		checkPrefix(t, ctx, c, name(i), ackedTo[i].Load())
	}
	t.Logf("drain: SIGTERM to exit %s (budget %s); exit to successor serving %s; pause in acks %s, in tail delivery %s; %d records acked before SIGTERM, %d in all",
		exited.Sub(term).Round(time.Millisecond), drainBudget, serving.Sub(exited).Round(time.Millisecond),
		gap(o.acks, term).Round(time.Millisecond), gap(o.tails, term).Round(time.Millisecond), atTerm, o.acked.Load())
}
