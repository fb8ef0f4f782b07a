package read

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

// shortGets returns one byte less than asked for ranges at or past cut.
type shortGets struct {
	objstore.Bucket
	cut int64
}

func (b shortGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p, err := b.Bucket.Get(ctx, key, off, n)
	if err == nil && off >= b.cut && len(p) > 0 {
		p = p[:len(p)-1]
	}
	return p, err
}

// getParts puts a range larger than PartBytes together from parallel
// parts, byte for byte, at any offset and length (one part, exact
// multiples, a short last part); a part shorter than asked fails it.
func TestGetParts(t *testing.T) {
	ctx := context.Background()
	m := objstore.NewMem("settled")
	obj := make([]byte, 3*PartBytes+777)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range obj {
		obj[i] = byte(rng.Uint32())
	}
	if err := m.PutIfAbsent(ctx, "o", obj); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ off, n int64 }{{0, 10}, {5, PartBytes}, {0, PartBytes + 1}, {13, 2 * PartBytes}, {100, 3 * PartBytes}, {0, int64(len(obj))}} {
		got, err := getParts(ctx, m, "o", c.off, c.n)
		if err != nil {
			t.Fatalf("%d+%d: %v", c.off, c.n, err)
		}
		if !bytes.Equal(got, obj[c.off:c.off+c.n]) {
			t.Fatalf("%d+%d: the parts put together differ from the object", c.off, c.n)
		}
	}
	if _, err := getParts(ctx, shortGets{m, 2 * PartBytes}, "o", 0, int64(len(obj))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a short part: %v", err)
	}
	if _, err := getParts(ctx, m, "missing", 0, 2*PartBytes); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a missing object: %v", err)
	}
}

// hedgeClock records the delays the chain set's hedge asks for; its
// timers never fire (only a missing copy makes the read ask the next).
type hedgeClock struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (c *hedgeClock) Now() time.Time        { return time.Now() }
func (c *hedgeClock) Sleep(d time.Duration) { time.Sleep(d) }
func (c *hedgeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	c.mu.Unlock()
	return nil
}

// A transit GET is hedged after the chain's delay plus its body's time at
// hedgeMBps, not after a fixed 20 ms. Regression test: a 1 MiB GET still
// streaming at 90 MB/s (11 ms of body after a first byte of up to 10 ms)
// was hedged, and with 16 GETs in flight per session the second copies
// made 1.6 bytes fetched per byte read in the catch-up bench.
func TestTransitGetsHedgeForTheirSize(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n = 4
	for i := range n { // locations of about 1 MiB
		var recs []format.Record
		for range 4 {
			recs = append(recs, format.Record{Body: bytes.Repeat([]byte{byte(i)}, 250<<10)})
		}
		if _, err := e.star.Append(ctx, e.id, recs, star.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.absorb()
	clk := &hedgeClock{}
	e.r.Sets = map[metastore.Class]chain.Set{metastore.Express: {Buckets: e.set.Buckets, W: e.set.W, Clock: clk}}
	refs, err := e.meta.QueryRefs(ctx, e.st.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var lengths []int64
	for _, r := range refs {
		for _, l := range r.Locations {
			lengths = append(lengths, l.Length)
		}
	}
	got := e.sessionAll(nil)
	if len(got) != 4*n {
		t.Fatalf("%d records, want %d", len(got), 4*n)
	}
	for i, r := range got {
		if r.Seq != uint64(i) || r.Body[0] != byte(i/4) {
			t.Fatalf("record %d: seq %d body of %d", i, r.Seq, r.Body[0])
		}
	}
	clk.mu.Lock()
	defer clk.mu.Unlock()
	if len(clk.delays) < len(lengths) {
		t.Fatalf("%d hedge timers for %d locations", len(clk.delays), len(lengths))
	}
	prefetched := 0
	for _, d := range clk.delays {
		// about 1 MiB: 20 ms plus 21 ms of body at 50 MB/s, and a second
		// more when no read waits on it yet (read-ahead)
		if d >= prefetchHedge {
			d -= prefetchHedge
			prefetched++
		}
		if d < chain.DefaultHedge+20*time.Millisecond || d > chain.DefaultHedge+22*time.Millisecond {
			t.Fatalf("a ~1 MiB GET (locations %v) hedged after %v", lengths, d)
		}
	}
	if prefetched == 0 || prefetched == len(clk.delays) {
		t.Fatalf("%d of %d GETs hedged as read-ahead: want the read-ahead's late, the awaited location's not", prefetched, len(clk.delays))
	}
}
