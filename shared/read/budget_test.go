package read

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// inflightGets tracks the bytes of distinct ranges being fetched at once,
// and the most at once.
type inflightGets struct {
	mu     sync.Mutex
	ranges map[[3]any]int
	bytes  int64
	peak   int64
}

type trackedBucket struct {
	objstore.Bucket
	t *inflightGets
}

func (b trackedBucket) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	k := [3]any{key, off, n}
	b.t.mu.Lock()
	if b.t.ranges[k] == 0 {
		b.t.bytes += n
		b.t.peak = max(b.t.peak, b.t.bytes)
	}
	b.t.ranges[k]++
	b.t.mu.Unlock()
	defer func() {
		b.t.mu.Lock()
		b.t.ranges[k]--
		if b.t.ranges[k] == 0 {
			b.t.bytes -= n
		}
		b.t.mu.Unlock()
	}()
	time.Sleep(time.Millisecond) // let the sessions' fetches overlap
	return b.Bucket.Get(ctx, key, off, n)
}

// settledThenTransit appends 3000 records, absorbs and settles them, then
// appends and absorbs transitBatches batches of 50 more (left in transit).
func (e *env) settledThenTransit(transitBatches int) {
	e.t.Helper()
	e.appendN(60, 50)
	e.absorb()
	if _, err := e.settler().Run(context.Background(), e.chain); err != nil {
		e.t.Fatal(err)
	}
	e.appendN(transitBatches, 50)
	e.absorb()
}

// Many sessions catching up at once, over settled and transit locations,
// share one small budget: what they hold or fetch never exceeds it (the
// budget's own count, and, independently, the bytes of the GETs in flight),
// a settled location larger than the whole budget is still read (alone),
// every session gets every record once and in order, and all is given
// back when they end.
func TestBudgetBoundsManySessions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.settledThenTransit(30)
	e.appendN(2, 50)
	refs, err := e.meta.QueryRefs(ctx, e.st.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var biggest int64
	settled := false
	for _, r := range refs {
		for _, l := range r.Locations {
			biggest = max(biggest, l.Length)
			settled = settled || l.Settled
		}
	}
	const total = 24 << 10
	if !settled || biggest <= total {
		t.Fatalf("backlog: settled %v, biggest location %d bytes: want a settled one above the budget (%d)", settled, biggest, total)
	}
	tr := &inflightGets{ranges: map[[3]any]int{}}
	var bs []objstore.Bucket
	for _, b := range e.set.Buckets {
		bs = append(bs, trackedBucket{b, tr})
	}
	bud := NewBudget(total)
	e.r = &Reader{Star: e.star, Meta: e.meta, AheadBudget: bud,
		// No hedged second copies: a loser still in flight after its
		// read returned is not the read-ahead's.
		Sets:    map[metastore.Class]chain.Set{metastore.Express: {Buckets: bs, W: e.set.W, Hedge: -1}},
		Settled: trackedBucket{e.settled, tr}}

	const readers = 12
	got := sessions(t, e, readers, nil)
	for i := range readers {
		check(t, got[i], 0, 4600)
	}
	if p := bud.Peak(); p > total || p < total/2 {
		t.Fatalf("budget peak %d bytes of %d: over it, or the sessions never contended", p, total)
	}
	// The GETs in flight are bounded by the budget too (each charged
	// range is fetched once per session that holds it; one larger than the
	// budget is charged the whole budget and fetched alone).
	if tr.peak > max(total, biggest) {
		t.Fatalf("%d bytes of GETs in flight at once, budget %d", tr.peak, total)
	}
	deadline := time.Now().Add(5 * time.Second)
	for bud.Used() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still charged after every session ended", bud.Used())
		}
		time.Sleep(time.Millisecond)
	}
}

// A session waiting for budget ends with its context, charging nothing.
func TestBudgetWaitEndsWithContext(t *testing.T) {
	b := NewBudget(100)
	if !b.tryTake(80, 1) || b.tryTake(30, 1) || b.tryTake(10, prefetchShare) {
		t.Fatal("tryTake: 80 of 100 taken, then 30 granted (over the total) or 10 granted over the prefetch share")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.take(ctx, 30); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("take over the budget: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.take(context.Background(), 30) }()
	b.give(80)
	if err := <-done; err != nil || b.Used() != 30 || b.Peak() != 80 {
		t.Fatalf("after give: %v, used %d, peak %d", err, b.Used(), b.Peak())
	}
	if c := b.charge(1000); c != 100 {
		t.Fatalf("a location over the total is charged %d, want the total", c)
	}
}

// rangeGets counts the GETs of each range of a bucket.
type rangeGets struct {
	objstore.Bucket
	mu *sync.Mutex
	n  map[[3]any]int
}

func (b rangeGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b.mu.Lock()
	b.n[[3]any{key, off, n}]++
	b.mu.Unlock()
	return b.Bucket.Get(ctx, key, off, n)
}

// A session fetches each location of its backlog once: a location the
// read has passed is given back to the budget and dropped from the plan,
// never fetched again. Regression test: passed locations stayed planned,
// and the next fill fetched them again (1.9 bytes fetched per byte read in
// the catch-up bench, 1.04 before the budget).
func TestAheadFetchesEachLocationOnce(t *testing.T) {
	e := newEnv(t)
	e.settledThenTransit(60)
	// Every copy landed (the last lands after the W-copy ack): a GET of a
	// copy not there yet would ask the next zone for the same range.
	waitCopies(t, e.set.Buckets, "chains/")
	var mu sync.Mutex
	counts := map[[3]any]int{}
	var bs []objstore.Bucket
	for _, b := range e.set.Buckets {
		bs = append(bs, rangeGets{b, &mu, counts})
	}
	// No hedged second copy: every GET is the read-ahead's own.
	e.r.Sets = map[metastore.Class]chain.Set{metastore.Express: {Buckets: bs, W: e.set.W, Hedge: -1}}
	e.r.Settled = rangeGets{e.settled, &mu, counts}
	check(t, e.sessionAll(nil), 0, 6000)
	if len(counts) < 10 {
		t.Fatalf("%d locations fetched: the test wants many", len(counts))
	}
	for r, n := range counts {
		if n != 1 {
			t.Fatalf("%v fetched %d times", r, n)
		}
	}
}
