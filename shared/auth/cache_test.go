package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
)

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func newClock() *testClock               { return &testClock{now: time.Unix(1_800_000_000, 0)} }
func tokenN(t testing.TB, n int) string  { return mustToken(t, fmt.Appendf(nil, "%032d", n)) }
func mustToken(t testing.TB, b []byte) string {
	tk, err := NewToken(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func reads(m *metacount.Store) int64 { return m.Snapshot().Of(metacount.GetToken) }

// TestUnknownTokenLookupsLimited: lookups of unknown tokens stop at the
// source's burst, refill at its rate on the clock, and stop at the global
// burst across many sources; every refused one costs no read.
func TestUnknownTokenLookupsLimited(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := metacount.New(metastore.NewMem())
	c := &Checker{Meta: m, Now: clk.Now, SourceRate: Rate{PerSecond: 2, Burst: 5}, GlobalRate: Rate{PerSecond: 10, Burst: 20}}
	limited := 0
	for i := range 50 {
		_, err := c.CheckFrom(ctx, tokenN(t, i), "10.0.0.1")
		switch {
		case errors.Is(err, ErrRateLimited):
			limited++
		case !errors.Is(err, ErrUnauthenticated):
			t.Fatalf("token %d: %v", i, err)
		}
	}
	if got := reads(m); got != 5 || limited != 45 {
		t.Fatalf("one source: %d reads, %d limited; want 5 and 45", got, limited)
	}
	clk.Add(time.Second) // 2 more for the source
	for i := range 5 {
		_, _ = c.CheckFrom(ctx, tokenN(t, 100+i), "10.0.0.1")
	}
	if got := reads(m); got != 7 {
		t.Fatalf("after a second: %d reads, want 7", got)
	}
	// Many sources, one lookup each: the global bucket had 20, lost 5,
	// refilled to its burst of 20 in the second, lost 2: 18 lookups left.
	for i := range 1000 {
		_, _ = c.CheckFrom(ctx, tokenN(t, 1000+i), fmt.Sprintf("10.1.%d.%d", i/256, i%256))
	}
	if got := reads(m); got != 7+18 {
		t.Fatalf("1000 sources: %d reads, want 25 (the global bucket)", got)
	}
	// A repeated unknown token is answered from the miss cache.
	before := reads(m)
	for range 10 {
		if _, err := c.CheckFrom(ctx, tokenN(t, 0), "10.0.0.2"); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("cached miss: %v", err)
		}
	}
	if reads(m) != before {
		t.Fatal("a cached miss was looked up again")
	}
}

// TestValidGrantsSurviveAFlood: misses never evict grants; an expired
// grant is refreshed even while lookups are limited; the caches stay
// bounded.
func TestValidGrantsSurviveAFlood(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := metacount.New(metastore.NewMem())
	c := &Checker{Meta: m, Now: clk.Now, MaxEntries: 100, SourceRate: Rate{PerSecond: 1, Burst: 1000}, GlobalRate: Rate{PerSecond: 1, Burst: 1000}}
	good := tokenN(t, 1)
	if err := Issue(ctx, m, good, "p/", []Op{Read}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckFrom(ctx, good, "a"); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		_, _ = c.CheckFrom(ctx, tokenN(t, 10+i), fmt.Sprintf("s%d", i))
	}
	c.mu.Lock()
	sizes := []int{c.known.len(), c.misses.len(), c.sources.len()}
	c.mu.Unlock()
	for _, n := range sizes {
		if n > 100 {
			t.Fatalf("cache sizes %v past MaxEntries 100", sizes)
		}
	}
	before := reads(m)
	if _, err := c.CheckFrom(ctx, good, "a"); err != nil || reads(m) != before {
		t.Fatalf("the valid grant was evicted by misses: %v, %d reads", err, reads(m)-before)
	}
	// Every bucket is empty now; the valid token's grant expires and is
	// still looked up again.
	if _, err := c.CheckFrom(ctx, tokenN(t, 5000), "a"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("want the limit reached: %v", err)
	}
	clk.Add(11 * time.Second) // past the TTL; the buckets refill 11 each
	for i := range 50 {
		_, _ = c.CheckFrom(ctx, tokenN(t, 6000+i), "a")
	}
	if _, err := c.CheckFrom(ctx, tokenN(t, 7000), "a"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("want the limit reached again: %v", err)
	}
	if _, err := c.CheckFrom(ctx, good, "a"); err != nil {
		t.Fatalf("refreshing a known-valid grant under the limit: %v", err)
	}
}

// slowMeta delays GetToken until released.
type slowMeta struct {
	*metacount.Store
	release chan struct{}
}

func (s slowMeta) GetToken(ctx context.Context, hash string) (metastore.Token, error) {
	<-s.release
	return s.Store.GetToken(ctx, hash)
}

// TestConcurrentChecksShareALookup: 50 concurrent checks of one token cost
// one metastore read.
func TestConcurrentChecksShareALookup(t *testing.T) {
	ctx := context.Background()
	m := metacount.New(metastore.NewMem())
	good := tokenN(t, 1)
	if err := Issue(ctx, m, good, "", []Op{Admin}); err != nil {
		t.Fatal(err)
	}
	sm := slowMeta{Store: m, release: make(chan struct{})}
	c := &Checker{Meta: sm}
	for _, tk := range []string{good, tokenN(t, 2)} {
		before := reads(m)
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for range 50 {
			wg.Go(func() { _, err := c.Check(ctx, tk); errs <- err })
		}
		time.Sleep(50 * time.Millisecond) // let them gather on the flight
		sm.release <- struct{}{}
		wg.Wait()
		close(errs)
		for err := range errs {
			if (tk == good) != (err == nil) {
				t.Fatalf("token %.12s: %v", tk, err)
			}
		}
		if n := reads(m) - before; n != 1 {
			t.Fatalf("50 concurrent checks cost %d reads, want 1", n)
		}
	}
}

func TestPrefixWarning(t *testing.T) {
	for p, warn := range map[string]bool{"": false, "team-a/": false, "team-a-": false, "a.b.": false, "team-a": true, "x1": true, "é": true} {
		if got := PrefixWarning(p); (got != "") != warn || (warn && !strings.Contains(got, fmt.Sprintf("%q", p))) {
			t.Errorf("PrefixWarning(%q) = %q", p, got)
		}
	}
}
