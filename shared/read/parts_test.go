package read

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/strandlog/strand/shared/objstore"
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
