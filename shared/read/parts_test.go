package read

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
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

// slowGets answers each GET after a delay and counts those of a copy that
// exists (a copy missing from the first bucket is not a hedge).
type slowGets struct {
	objstore.Bucket
	d time.Duration
	n *atomic.Int64
}

func (b slowGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	time.Sleep(b.d)
	p, err := b.Bucket.Get(ctx, key, off, n)
	if !errors.Is(err, objstore.ErrNotFound) {
		b.n.Add(1)
	}
	return p, err
}

// A transit GET slower than the chain's default hedge (20 ms) but within
// the time its body is given asks no second copy. Regression test: with 16
// GETs in flight per session, second copies made 1.6 bytes fetched per
// byte read in the catch-up bench.
func TestTransitGetsHedgeForTheirSize(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const n = 8
	for i := range n { // locations of about 1 MiB: hedged after about 40 ms
		var recs []format.Record
		for range 4 {
			recs = append(recs, format.Record{Body: bytes.Repeat([]byte{byte(i)}, 250<<10)})
		}
		if _, err := e.star.Append(ctx, e.id, recs, star.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.absorb()
	var gets atomic.Int64
	var bs []objstore.Bucket
	for _, b := range e.set.Buckets {
		bs = append(bs, slowGets{b, 22 * time.Millisecond, &gets})
	}
	e.r.Sets = map[metastore.Class]chain.Set{metastore.Express: {Buckets: bs, W: e.set.W}}
	refs, err := e.meta.QueryRefs(ctx, e.st.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	locs := 0
	for _, r := range refs {
		locs += len(r.Locations)
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
	if g := gets.Load(); g != int64(locs) {
		t.Fatalf("%d GETs for %d transit locations", g, locs)
	}
}
