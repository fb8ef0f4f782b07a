package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/shared/wake"
)

type world struct {
	meta    metastore.Store
	mems    []*objstore.Mem
	buckets []objstore.Bucket
	inj     []*objstore.Injector
	settled *objstore.Mem
	// passIndex: the absorb writes pass indexes (design 014) to settled,
	// not refs.
	passIndex bool
}

func newWorld(k int) *world {
	w := &world{meta: metastore.NewMem(), settled: objstore.NewMem("settled")}
	for i := 0; i < k; i++ {
		m := objstore.NewMem(fmt.Sprintf("x%d", i))
		in := objstore.NewInjector(int64(i))
		w.mems = append(w.mems, m)
		w.inj = append(w.inj, in)
		w.buckets = append(w.buckets, objstore.WithFaults(m, in))
	}
	return w
}

func (w *world) set() chain.Set {
	return chain.Set{Star: "star-0", Buckets: w.buckets, W: 2, Backoff: 5 * time.Millisecond}
}

func (w *world) absorber() *absorb.Absorber {
	a := &absorb.Absorber{Meta: w.meta, Sets: absorb.Sets{Express: w.set()}}
	if w.passIndex {
		a.Index = w.settled
	}
	return a
}

// node is one star process: the star, with the absorb in-process when
// withAbsorb is set (otherwise nothing absorbs while it runs).
type node struct {
	s      *star.Star
	cancel context.CancelFunc
}

func (w *world) startStar(t testing.TB, withAbsorb bool) *node {
	t.Helper()
	cfg := star.Defaults()
	cfg.Standard = star.ClassConfig{}
	cfg.Express = star.ClassConfig{Buckets: w.buckets, W: 2, MemoryBufferMiB: 8, ParallelUploads: 8,
		FlushDeadline: time.Millisecond, FlightKiB: 32, CommitDeadline: 5 * time.Second}
	cfg.ReleaseEventInterval = 5 * time.Millisecond
	abs := w.absorber()
	opt := star.Options{
		NewFencer: func(id string, cc star.ClassConfig) star.Fencer {
			return chain.Set{Star: id, Buckets: cc.Buckets, W: cc.W, Backoff: 5 * time.Millisecond}
		},
		Absorber: abs,
	}
	ctx, cancel := context.WithCancel(context.Background())
	var local *wake.Local
	if withAbsorb {
		local = wake.NewLocal(abs, nil, nil)
		opt.Waker = local
	}
	s, err := star.New(cfg, w.meta, opt)
	if err != nil {
		t.Fatal(err)
	}
	if local != nil {
		local.SetObserver(s)
		go local.Run(ctx, 0)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &node{s: s, cancel: cancel}
}

// kill stops the process without any orderly shutdown of its data: what
// is in flight stays wherever it got to.
func (n *node) kill() {
	n.cancel()
	n.s.Close()
}

// open opens streams on a star with tails recovered from refs.
func (w *world) open(t testing.TB, s *star.Star, ids []format.StreamID) {
	t.Helper()
	for _, id := range ids {
		info := star.StreamInfo{ID: id, Class: metastore.Express}
		r, err := w.meta.LastRef(context.Background(), id.String())
		switch {
		case err == nil:
			info.Next, info.LastTsMs = r.LastSeq+1, r.LastTsMs
		case !errors.Is(err, metastore.ErrNotFound):
			t.Fatal(err)
		}
		if err := s.Open(info); err != nil {
			t.Fatal(err)
		}
	}
}

type ackLog struct {
	mu   sync.Mutex
	seqs map[format.StreamID]map[uint64]string
}

func (a *ackLog) add(id format.StreamID, seq uint64, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seqs == nil {
		a.seqs = map[format.StreamID]map[uint64]string{}
	}
	if a.seqs[id] == nil {
		a.seqs[id] = map[uint64]string{}
	}
	if old, dup := a.seqs[id][seq]; dup {
		panic(fmt.Sprintf("seq %d of %s acked twice: %q and %q", seq, id, old, body))
	}
	a.seqs[id][seq] = body
}

// load appends from several producers until stop is closed, logging acks.
func load(s *star.Star, ids []format.StreamID, producers int, tag string, acks *ackLog, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := ids[(p+i)%len(ids)]
				b := fmt.Sprintf("%s-p%d-%d", tag, p, i)
				a, err := s.Append(context.Background(), id, []format.Record{{Body: []byte(b + "a")}, {Body: []byte(b + "b")}}, star.AppendOptions{})
				if err != nil {
					return // the star died under us: unacked
				}
				acks.add(id, a.FirstSeq, b+"a")
				acks.add(id, a.FirstSeq+1, b+"b")
			}
		}()
	}
	return &wg
}

// verify reads every stream through its refs after the chain is absorbed
// up to the live star's released head, and checks that every acked record
// is there at its acked seq, seqs are contiguous from 0, and no body
// appears twice.
func (w *world) verify(t *testing.T, s *star.Star, ids []format.StreamID, acks *ackLog) int {
	t.Helper()
	ctx := context.Background()
	c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	if err := w.absorber().AbsorbTo(ctx, c, s.Released(c)); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, id := range ids {
		recs, err := absorbtest.ReadStream(ctx, w.meta, w.set(), w.settled, id)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		seen := map[string]bool{}
		for _, r := range recs {
			if seen[string(r.Body)] {
				t.Fatalf("stream %s: record %q appears twice", id, r.Body)
			}
			seen[string(r.Body)] = true
		}
		for seq, b := range acks.seqs[id] {
			if seq >= uint64(len(recs)) || string(recs[seq].Body) != b {
				t.Fatalf("stream %s: acked seq %d (%q) is not readable at its seq (stream holds %d records)", id, seq, b, len(recs))
			}
			total++
		}
	}
	return total
}

// TestTakeoverAfterKill kills a star at varied points under load, with and
// without its absorb running, and takes over with a new incarnation: every
// acked record is readable at its seq, seqs stay contiguous, nothing is
// duplicated, and the new star appends after the recovered tails.
func TestTakeoverAfterKill(t *testing.T) {
	ids := absorbtest.StreamIDs(5)
	for i, tc := range []struct {
		name       string
		absorb     bool
		killAfter  time.Duration
		slowBucket bool
	}{
		{"before any absorb", false, 30 * time.Millisecond, false},
		{"absorb running", true, 40 * time.Millisecond, false},
		{"right after start", true, 0, false},
		{"with a slow bucket, puts in flight", true, 25 * time.Millisecond, true},
		{"absorb running, long", true, 120 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(3)
			if tc.slowBucket {
				w.inj[2].SetLatency(20*time.Millisecond, 60*time.Millisecond)
			}
			acks := &ackLog{}
			var live *node
			for gen := 0; gen < 3; gen++ {
				n := w.startStar(t, tc.absorb)
				w.open(t, n.s, ids)
				stop := make(chan struct{})
				wg := load(n.s, ids, 4, fmt.Sprintf("g%d", gen), acks, stop)
				time.Sleep(tc.killAfter + time.Duration(rand.IntN(10)+i)*time.Millisecond)
				if gen == 2 {
					close(stop)
					wg.Wait()
					live = n
					break
				}
				n.kill()
				close(stop)
				wg.Wait()
			}
			defer live.kill()
			if got := w.verify(t, live.s, ids, acks); got == 0 {
				t.Fatal("no acked records to check")
			}
			head, _ := w.meta.GetHead(context.Background(), metastore.ChainID{Star: "star-0", Class: metastore.Express})
			if head.Epoch != 3 {
				t.Fatalf("after two takeovers the chain is at epoch %d, want 3", head.Epoch)
			}
		})
	}
}
