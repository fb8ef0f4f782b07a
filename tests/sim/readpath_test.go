package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/star"
)

var readSeedsFlag = flag.Int("read-seeds", 16, "seeds of TestSimReadPath (seeds 1..n; -seed replays one)")

// TestSimReadPath is issue 19's read-path workload: producers append to
// every stream while settle runs again and again with a small merge
// threshold and small objects (refs are merged and split all the time),
// trim removes the settled slots, and readers read through a metastore
// whose QueryRefs tears the way DynamoDB's can (TornRefs). Invariants,
// against the producers' own record of what was acknowledged:
//
//   - every Read from seq s returns a gap-free run of seqs starting at s
//     (nothing is trimmed by retention here, so s is the first retained),
//     each record the one acknowledged at its seq;
//   - every tail session (one per stream, from 0) delivers each seq once,
//     in order, never skipping one, and reaches the final tail.
//
// A read may fail (Unavailable when the view stays torn): never wrong.
func TestSimReadPath(t *testing.T) {
	seeds := budgetSeeds(*readSeedsFlag)
	readPathHoles.Store(0)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: go test ./tests/sim -run TestSimReadPath -seed=%d -v", seed)
			synctest.Test(t, func(t *testing.T) { runReadPath(t, seed, 200) })
		})
	}
	// The workload must produce what it is for: torn views with holes.
	if len(seeds) > 1 && !t.Failed() && readPathHoles.Load() == 0 {
		t.Fatalf("%d seeds and not one torn QueryRefs answer with a hole: the workload does not test the read path", len(seeds))
	}
}

var readPathHoles atomic.Int64

// readPath is one run's state: the acknowledged records per stream, by seq
// (the producers' record), and what reads returned, checked against it at
// the end (a record can be read before its producer has its ack).
type readPath struct {
	seed   int64
	mu     sync.Mutex
	acked  []map[uint64]string
	seen   []seen
	reads  int
	failed int
}

type seen struct {
	what   string
	stream int
	seq    uint64
	body   string
}

// checkRun checks one read's (or session batch's) records: consecutive
// from want. It keeps them for the check of their content.
func (p *readPath) checkRun(what string, stream int, want uint64, recs []star.SeqRecord) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range recs {
		if r.Seq != want {
			return fmt.Errorf("seed %d: %s of stream %d: seq %d where %d was due (a skip or a repeat)", p.seed, what, stream, r.Seq, want)
		}
		p.seen = append(p.seen, seen{what, stream, r.Seq, string(r.Body)})
		want++
	}
	return nil
}

// checkContent checks that every record read is the one acknowledged at
// its seq.
func (p *readPath) checkContent() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.seen {
		if b, ok := p.acked[s.stream][s.seq]; !ok || b != s.body {
			return fmt.Errorf("seed %d: %s of stream %d: seq %d holds %q, acknowledged %q (%v)", p.seed, s.what, s.stream, s.seq, s.body, b, ok)
		}
	}
	return nil
}

func runReadPath(t *testing.T, seed int64, steps int) {
	opt := DefaultOptions()
	opt.BacklogFlights = 64
	opt.PassIndex = seed%2 == 0 // refs and the pass index (design 014)
	w, err := NewWorld(seed, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := w.StartNode(ctx, 1, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9ead))
	p := &readPath{seed: seed}
	for range w.IDs {
		p.acked = append(p.acked, map[uint64]string{})
	}
	torn := NewTornRefs(w.Meta, seed, 5*time.Millisecond)
	rd := &read.Reader{Star: n.Star, Meta: torn, Sets: map[metastore.Class]chain.Set{metastore.Express: w.RawSet()}, Settled: w.SettledMem}
	if win := w.Window(torn, w.SettledMem); win != nil {
		rd.Transit = win // refs torn as DynamoDB tears them, then the window
	}

	var bg, sw sync.WaitGroup
	sctx, stopSessions := context.WithCancel(ctx)
	defer func() {
		// On a failure too: stop everything so the bubble can end.
		stopSessions()
		cancel()
		sw.Wait()
		bg.Wait()
	}()
	errs := make(chan error, 64)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	// Settlement, racing the reads: merges (MergeBelowBytes) and splits
	// (MaxObjectBytes) on almost every run; trim deletes what settle moved.
	settler := w.Settler()
	settler.Meta, settler.Settled = w.Meta, w.SettledMem
	settler.MergeBelowBytes, settler.MaxObjectBytes = 6<<10, 8<<10
	trimmer := w.Trimmer()
	trimmer.Meta, trimmer.Settled = w.Meta, w.SettledMem
	trimmer.Sets.Express = w.RawSet()
	settler.Sets.Express = w.RawSet()
	for i, run := range []func(context.Context, metastore.ChainID) (metastore.Cursor, error){settler.Run, trimmer.Run} {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(i))) // each loop its own
		bg.Go(func() {
			for ctx.Err() == nil {
				if _, err := run(ctx, Chain); err != nil && ctx.Err() == nil && !errors.Is(err, metastore.ErrConflict) {
					fail(fmt.Errorf("seed %d: settlement: %w", seed, err))
				}
				time.Sleep(time.Duration(1+rng.IntN(4)) * time.Millisecond)
			}
		})
	}
	// One tail session per stream, from 0.
	type sess struct {
		mu   sync.Mutex
		next uint64
	}
	sessions := make([]*sess, len(w.Streams))
	for i, st := range w.Streams {
		s := &sess{}
		sessions[i] = s
		sw.Go(func() {
			err := rd.Session(sctx, st, read.Start{}, read.SessionOptions{Heartbeat: 50 * time.Millisecond}, func(b read.Batch) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				if err := p.checkRun("tail session", i, s.next, b.Records); err != nil {
					return err
				}
				s.next += uint64(len(b.Records))
				return nil
			})
			if err != nil && sctx.Err() == nil {
				fail(fmt.Errorf("seed %d: tail session of stream %d ended: %w", seed, i, err))
			}
		})
	}

	for step := range steps {
		si := rng.IntN(len(w.Streams))
		switch k := rng.IntN(10); {
		case k < 5: // append a batch
			cnt := 1 + rng.IntN(30)
			recs := make([]format.Record, cnt)
			bodies := make([]string, cnt)
			for j := range recs {
				bodies[j] = fmt.Sprintf("st%d-step%d-%d-%s", si, step, j, filler(rng.IntN(300)))
				recs[j] = format.Record{TimestampMs: int64(step), Body: []byte(bodies[j])}
			}
			ack, err := n.Star.Append(ctx, w.IDs[si], recs, star.AppendOptions{})
			if err != nil {
				t.Fatalf("seed %d step %d: append: %v", seed, step, err)
			}
			p.mu.Lock()
			for j := range recs {
				p.acked[si][ack.FirstSeq+uint64(j)] = bodies[j]
			}
			p.mu.Unlock()
		default: // read from a random seq, concurrently with what follows
			tail, _, _ := n.Star.Tail(w.IDs[si])
			from := uint64(rng.Int64N(int64(tail) + 1))
			lim := read.Limits{Count: 1 + rng.IntN(200)}
			bg.Go(func() {
				res, err := rd.Read(ctx, w.Streams[si], read.Start{Kind: read.FromSeq, Seq: from}, lim)
				p.mu.Lock()
				p.reads++
				p.mu.Unlock()
				if err != nil && ctx.Err() != nil {
					return // the run is over
				}
				if err != nil {
					if !errors.Is(err, metastore.ErrUnavailable) {
						fail(fmt.Errorf("seed %d: read of stream %d from %d: %w", seed, si, from, err))
					}
					p.mu.Lock()
					p.failed++
					p.mu.Unlock()
					return
				}
				if err := p.checkRun("read", si, from, res.Records); err != nil {
					fail(err)
				}
				if len(res.Records) > 0 && res.Next != from+uint64(len(res.Records)) {
					fail(fmt.Errorf("seed %d: read of stream %d from %d: %d records, next %d", seed, si, from, len(res.Records), res.Next))
				}
			})
		}
		time.Sleep(time.Duration(rng.IntN(6)) * time.Millisecond)
		select {
		case err := <-errs:
			t.Fatalf("step %d: %v", step, err)
		default:
		}
	}
	// Every session reaches its stream's final tail.
	deadline := time.Now().Add(time.Minute)
	for i, s := range sessions {
		tail, _, _ := n.Star.Tail(w.IDs[i])
		for {
			s.mu.Lock()
			got := s.next
			s.mu.Unlock()
			if got == tail {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d: the tail session of stream %d stopped at %d, tail %d", seed, i, got, tail)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stopSessions()
	sw.Wait()
	cancel()
	bg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if err := p.checkContent(); err != nil {
		t.Fatal(err)
	}
	if torn.Reads() == 0 || p.reads == 0 {
		t.Fatalf("seed %d: the workload read nothing (%d item reads, %d reads)", seed, torn.Reads(), p.reads)
	}
	readPathHoles.Add(torn.Holes())
	t.Logf("seed %d: %d reads (%d unavailable), %d ref item reads, %d torn answers with a hole", seed, p.reads, p.failed, torn.Reads(), torn.Holes())
}

func filler(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}
