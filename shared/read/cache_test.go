package read

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

func ckey(name string, length int64) cacheKey {
	return cacheKey{loc: locKey{key: name, length: length}}
}

// Concurrent gets of one location fetch it once, and every caller gets
// the one result; a later get is a hit.
func TestCacheSingleFlight(t *testing.T) {
	c := NewSegmentCache(1 << 20)
	var fetches atomic.Int32
	release := make(chan struct{})
	fetch := func(ctx context.Context) (format.SegmentInfo, []format.Record, error) {
		fetches.Add(1)
		<-release
		return format.SegmentInfo{FirstSeq: 7}, []format.Record{{Body: []byte("x")}}, nil
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, recs, err := c.get(context.Background(), ckey("a", 100), fetch)
			if err != nil || info.FirstSeq != 7 || len(recs) != 1 {
				errs <- fmt.Errorf("got %+v %d records, %v", info, len(recs), err)
			}
		}()
	}
	for c.Stats().Joined < n-1 { // every other caller waits on the first's fetch
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, _, err := c.get(context.Background(), ckey("a", 100), fetch); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if f := fetches.Load(); f != 1 || s.Fetches != 1 || s.Joined != n-1 || s.Hits != 1 {
		t.Fatalf("%d fetches for %d concurrent gets and one after; stats %+v", f, n, s)
	}
}

// The cache never holds more than its size: it evicts the least recently
// used, and serves but does not keep a location larger than all of it.
func TestCacheEvictsUnderItsBound(t *testing.T) {
	const size = 1000
	c := NewSegmentCache(3 * size)
	fetches := map[string]int{}
	get := func(name string, length int64) {
		t.Helper()
		_, _, err := c.get(context.Background(), ckey(name, length), func(context.Context) (format.SegmentInfo, []format.Record, error) {
			fetches[name]++
			return format.SegmentInfo{}, nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if s := c.Stats(); s.Bytes > 3*size {
			t.Fatalf("cache holds %d bytes, bound %d", s.Bytes, 3*size)
		}
	}
	get("a", size)
	get("b", size)
	get("c", size)
	get("a", size) // a is the most recent now
	get("d", size) // evicts b
	get("a", size)
	get("c", size)
	get("b", size) // fetched again; evicts d
	get("huge", 4*size)
	get("huge", 4*size) // not kept: fetched again
	want := map[string]int{"a": 1, "b": 2, "c": 1, "d": 1, "huge": 2}
	if fmt.Sprint(fetches) != fmt.Sprint(want) {
		t.Fatalf("fetches %v, want %v", fetches, want)
	}
	if s := c.Stats(); s.Entries != 3 || s.Bytes != 3*size || s.Evicted != 2 {
		t.Fatalf("stats %+v: want 3 entries of %d bytes, 2 evicted", s, size)
	}
}

// A failed fetch is not kept; a fetch every waiter has left is cancelled
// and not kept either: the next get fetches afresh.
func TestCacheKeepsNoFailureNorAbandonedFetch(t *testing.T) {
	c := NewSegmentCache(1 << 20)
	boom := errors.New("boom")
	_, _, err := c.get(context.Background(), ckey("a", 10), func(context.Context) (format.SegmentInfo, []format.Record, error) {
		return format.SegmentInfo{}, nil, boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	ok := func(context.Context) (format.SegmentInfo, []format.Record, error) {
		return format.SegmentInfo{}, nil, nil
	}
	if _, _, err := c.get(context.Background(), ckey("a", 10), ok); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Fetches != 2 || s.Entries != 1 {
		t.Fatalf("after a failed fetch and a good one: %+v", s)
	}

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		for c.Stats().Fetches < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, _, err = c.get(ctx, ckey("b", 10), func(fctx context.Context) (format.SegmentInfo, []format.Record, error) {
		<-fctx.Done() // a GET that never answers: only the cancel ends it
		close(stopped)
		return format.SegmentInfo{}, nil, fctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch nobody waits for was not cancelled")
	}
	if _, _, err := c.get(context.Background(), ckey("b", 10), ok); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Fetches != 4 || s.Entries != 2 {
		t.Fatalf("after an abandoned fetch and a good one: %+v", s)
	}
}

// rangeCount counts the GETs of each range of a set of buckets.
type rangeCount struct {
	mu sync.Mutex
	n  map[[3]any]int
}

type rangeCounted struct {
	objstore.Bucket
	c *rangeCount
}

func (b rangeCounted) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b.c.mu.Lock()
	b.c.n[[3]any{key, off, n}]++
	b.c.mu.Unlock()
	time.Sleep(time.Millisecond) // let the sessions' fetches overlap
	return b.Bucket.Get(ctx, key, off, n)
}

// Readers of one stream share what they fetch: 10 sessions catching up
// over settled and transit locations at once fetch every range once (the
// first to want a location fetches it, the others wait for that fetch or
// find it cached), and every session gets every record once, in order.
func TestSessionsShareFetchedSegments(t *testing.T) {
	e := newEnv(t)
	e.settledThenTransit(30)
	e.appendN(2, 50)
	rc := &rangeCount{n: map[[3]any]int{}}
	var bs []objstore.Bucket
	for _, b := range e.set.Buckets {
		bs = append(bs, rangeCounted{b, rc})
	}
	e.r = &Reader{Star: e.star, Meta: e.meta,
		// No hedged second copies: they would count as second GETs.
		Sets:    map[metastore.Class]chain.Set{metastore.Express: {Buckets: bs, W: e.set.W, Hedge: -1}},
		Settled: rangeCounted{e.settled, rc}}
	got := sessions(t, e, 10, nil)
	for i := range got {
		check(t, got[i], 0, 4600)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	settled := false
	for k, n := range rc.n {
		if n != 1 {
			t.Fatalf("range %v fetched %d times by 10 sessions, want once", k, n)
		}
		settled = settled || !isChainKey(k[0].(string))
	}
	if len(rc.n) < 10 || !settled {
		t.Fatalf("%d ranges fetched (settled among them: %v): want a backlog of many, settled and in transit", len(rc.n), settled)
	}
	if s := e.r.segmentCache().Stats(); s.Hits+s.Joined < 9*int64(len(rc.n)) {
		t.Fatalf("cache %+v for %d ranges and 10 sessions: want the other 9 sessions served from it", s, len(rc.n))
	}
}

func isChainKey(k string) bool { return len(k) > 7 && k[:7] == "chains/" }

// sessions reads e's stream from 0 to the tail in n concurrent NoTail
// sessions; session 0 calls between after each of its batches.
func sessions(t *testing.T, e *env, n int, between func(batch int)) [][]star.SeqRecord {
	t.Helper()
	got := make([][]star.SeqRecord, n)
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := 0
			err := e.r.Session(context.Background(), e.st, Start{}, SessionOptions{NoTail: true}, func(batch Batch) error {
				got[i] = append(got[i], batch.Records...)
				if i == 0 && between != nil {
					between(b)
				}
				b++
				return nil
			})
			if err != nil {
				failed.Store(err)
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return got
}

// Sessions sharing the cache while settle merges and moves refs and trim
// deletes the transit slots under them: every session still gets every
// record once, in order (a cached segment is the bytes its range held,
// which never change; the sessions only load the locations of the refs
// they have just queried).
//
// On the pass index, "flush" flushes every stream at every step (refs,
// the second step merging the first's object), "runs" settles into a run
// first and flushes it (with the new passes) during the read, trim then
// deleting the run and its pack (design 014, level 1).
func TestSharedCacheWithSettleAndTrimDuringRead(t *testing.T) {
	for _, mode := range []string{"refs", "flush", "runs"} {
		t.Run(mode, func(t *testing.T) { settleAndTrimDuringRead(t, mode, 1, 0, 4) })
	}
}
