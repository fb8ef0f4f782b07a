package star

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

// releaseRig is BenchmarkRelease's set-up: n flights of per one-record
// batches of one stream, claimed in order on the Standard loglet of a
// started star with nothing submitted (so nothing else touches the
// loglet's order), ready for markDurable. The stream's index and the
// loglet's released list have room for all of them, so that their growth
// (amortized in a real star, whose absorb trims them) is not counted.
func releaseRig(tb testing.TB, n, per int) (*loglet, *stream, []*flight) {
	tb.Helper()
	s := benchStar(tb, nil)
	l := s.loglets[metastore.Standard]
	st := &stream{id: sid(0), l: l}
	flights := make([]*flight, n)
	seq := uint64(0)
	for i := range flights {
		f := &flight{epoch: 1}
		for j := 0; j < per; j++ {
			f.batches = append(f.batches, &batch{st: st, first: seq, recs: 1, size: 100, done: make(chan struct{})})
			seq++
		}
		flights[i] = f
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st.publish(false)
	st.indexed = make([]*batch, 0, n*per)
	l.epoch = 1
	l.ord = newOrder(0, n)
	l.released = make([]*flight, 0, n)
	for _, f := range flights {
		f.slot = l.ord.claim()
		l.inflight[f.slot] = f
	}
	return l, st, flights
}

// TestReleaseAllocatesNothing: releasing a flight that nobody watches
// allocates nothing (the stream's view is marked stale, not rebuilt, and
// the metrics' updates are atomic operations on series held), and
// the next reader still sees the new tail. It failed with 32 allocations
// per flight of 16 batches when every released batch published a view and
// a wake channel.
func TestReleaseAllocatesNothing(t *testing.T) {
	const runs, per = 100, 16
	l, st, flights := releaseRig(t, runs+1, per) // AllocsPerRun runs once more to warm up
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		l.markDurable(flights[i])
		i++
	})
	if allocs != 0 {
		t.Fatalf("a release of %d batches nobody watches allocates %v times", per, allocs)
	}
	if v := st.current(); v.next != uint64((runs+1)*per) || len(v.indexed) != (runs+1)*per {
		t.Fatalf("view after the releases: tail %d, %d indexed; want %d", v.next, len(v.indexed), (runs+1)*per)
	}
	// The releases updated the metrics (client_golang's, ADR 0056) within
	// the allocations counted above.
	if a, f, h := l.m.appends.Value(), l.m.flights.Value(), l.m.ackLatency.Count(); a != (runs+1)*per || f != runs+1 || h != (runs+1)*per {
		t.Fatalf("metrics after %d releases of %d batches: %d appends, %d flights, %d ack latencies", runs+1, per, a, f, h)
	}
}

// TestReleaseWakesWatcher: a release wakes a reader that holds the wake
// channel, with the new view already published (no stale view for the woken
// reader to rebuild), and the release after it, with nobody watching,
// leaves the new channel open.
func TestReleaseWakesWatcher(t *testing.T) {
	l, st, flights := releaseRig(t, 3, 4)
	s := l.s
	s.mu.Lock()
	s.streams[st.id] = st
	s.mu.Unlock()
	tail, ch, err := s.WatchStream(st.id)
	if err != nil || tail != 0 {
		t.Fatal(tail, err)
	}
	l.markDurable(flights[0])
	select {
	case <-ch:
	default:
		t.Fatal("the release did not wake the watcher")
	}
	if v := st.v.Load(); v.stale.Load() || v.next != 4 {
		t.Fatalf("after a watched release: stale %v, tail %d; want a fresh view at 4", v.stale.Load(), v.next)
	}
	tail, ch, err = s.WatchStream(st.id)
	if err != nil || tail != 4 {
		t.Fatal(tail, err)
	}
	l.markDurable(flights[1])
	select {
	case <-ch:
	default:
		t.Fatal("the second release did not wake the watcher")
	}
	tail, _, _ = s.Tail(st.id)
	old := st.v.Load().w
	l.markDurable(flights[2]) // nobody holds the new channel
	if tail != 8 || st.v.Load().w != old {
		t.Fatalf("tail %d; an unwatched release replaced the wake channel", tail)
	}
	if next, _, _ := s.Tail(st.id); next != 12 {
		t.Fatalf("tail %d after the third release, want 12", next)
	}
}

// TestWatchStreamLosesNoWakeUp: a reader that watches and waits is woken
// by every release, 20,000 in lock step (the writer releases a flight as
// soon as the reader has seen the one before); a lost wake-up leaves the
// reader waiting and the writer's wait for it times out. Run with -race,
// it also checks the views' publication. The one interleaving that could
// lose a wake-up is made deterministically by
// TestWatchStreamRacingTheRelease.
func TestWatchStreamLosesNoWakeUp(t *testing.T) {
	const n = 20000
	l, st, flights := releaseRig(t, n, 1)
	s := l.s
	s.mu.Lock()
	s.streams[st.id] = st
	s.mu.Unlock()
	var seen atomic.Uint64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			tail, ch, err := s.WatchStream(st.id)
			if err != nil {
				t.Error(err)
				return
			}
			seen.Store(tail)
			if tail == n {
				return
			}
			select {
			case <-ch:
			case <-stop:
				return
			}
		}
	}()
	for i, f := range flights {
		l.markDurable(f)
		deadline := time.Now().Add(10 * time.Second)
		for seen.Load() < uint64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("release %d: the reader is at tail %d, never woken", i+1, seen.Load())
			}
			runtime.Gosched()
		}
	}
}

// TestWatchStreamRacingTheRelease makes the one interleaving that could
// lose a wake-up: the release looks at watched (nobody), then a reader's
// WatchStream takes the old view's tail and channel, then the release
// marks the view stale. The release must see the reader and close the
// channel (moved looks at watched again after marking the view stale);
// without that second look the reader waits for the next release with a
// tail that is already behind.
func TestWatchStreamRacingTheRelease(t *testing.T) {
	l, st, flights := releaseRig(t, 1, 1)
	s := l.s
	s.mu.Lock()
	s.streams[st.id] = st
	s.mu.Unlock()
	var tail uint64
	var ch <-chan struct{}
	var err error
	movedHook = func() {
		movedHook = nil
		tail, ch, err = s.WatchStream(st.id)
	}
	t.Cleanup(func() { movedHook = nil })
	l.markDurable(flights[0])
	if err != nil || ch == nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	if tail == 1 {
		t.Fatal("the reader saw the new tail: the hook ran too late to race the release")
	}
	select {
	case <-ch:
	default:
		t.Fatalf("reader at tail %d (the tail is 1) holds a channel the release did not close", tail)
	}
}
