package bench

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/strandlog/strand/shared/objstore"
)

// TestSettledSink: the write workload's settled bucket keeps every object
// whole but the per-stream settled objects of sinkBelow bytes or more,
// whose size, existence and listing stay exact while a read of their bytes
// fails with errNotKept (never an empty or wrong body).
func TestSettledSink(t *testing.T) {
	ctx := context.Background()
	s := &settledSink{Bucket: objstore.NewMem("settled")}
	small := bytes.Repeat([]byte{7}, 1000)
	large := bytes.Repeat([]byte{9}, sinkBelow)
	for key, body := range map[string][]byte{
		"streams/a/small":   small,
		"index/x/runs/pack": large, // not a stream object: kept whole
		"streams/a/large":   large,
	} {
		if err := s.PutIfAbsent(ctx, key, body); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	for key, want := range map[string][]byte{"streams/a/small": small, "index/x/runs/pack": large} {
		got, err := s.Get(ctx, key, 0, -1)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("get %s: %d bytes, %v; want the %d put", key, len(got), err, len(want))
		}
	}
	// View serves a kept object's bytes without a copy (a flush reads a
	// pack back to copy its entries out) and refuses a sunk one.
	if v, err := objstore.View(ctx, s, "index/x/runs/pack", 10, 100); err != nil || !bytes.Equal(v, large[10:110]) {
		t.Fatalf("view of a kept object: %d bytes, %v", len(v), err)
	}
	v1, _ := s.View(ctx, "index/x/runs/pack", 0, 1)
	v2, _ := s.View(ctx, "index/x/runs/pack", 0, 1)
	if len(v1) != 1 || &v1[0] != &v2[0] {
		t.Fatalf("two views of one object are different memory: a view copied")
	}
	if _, err := s.View(ctx, "streams/a/large", 0, -1); !errors.Is(err, errNotKept) {
		t.Fatalf("view of a sunk object: %v, want errNotKept", err)
	}
	if _, err := s.Get(ctx, "streams/a/large", 0, -1); !errors.Is(err, errNotKept) {
		t.Fatalf("get of a sunk object: %v, want errNotKept", err)
	}
	if _, err := s.GetInto(ctx, "streams/a/large", 0, make([]byte, 10)); !errors.Is(err, errNotKept) {
		t.Fatalf("get into of a sunk object: %v, want errNotKept", err)
	}
	if n, err := s.Head(ctx, "streams/a/large"); err != nil || n != int64(len(large)) {
		t.Fatalf("head: %d, %v; want %d", n, err, len(large))
	}
	if err := s.PutIfAbsent(ctx, "streams/a/large", large); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second put of a sunk key: %v, want ErrExists", err)
	}
	if err := s.PutIfAbsent(ctx, "streams/a/small", large); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("large put over a kept key: %v, want ErrExists", err)
	}
	if got, _ := s.Get(ctx, "streams/a/small", 0, -1); !bytes.Equal(got, small) {
		t.Fatalf("a refused put changed the kept object: %d bytes", len(got))
	}
	keys, err := s.List(ctx, "streams/")
	if err != nil || !slices.Equal(keys, []string{"streams/a/large", "streams/a/small"}) {
		t.Fatalf("list: %q, %v", keys, err)
	}
	if err := s.Delete(ctx, "streams/a/large"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Head(ctx, "streams/a/large"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("head after delete: %v, want ErrNotFound", err)
	}
	if err := s.PutIfAbsent(ctx, "streams/a/large", large); err != nil {
		t.Fatalf("put after delete: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.PutIfAbsent(cctx, "streams/b/large", large); !errors.Is(err, context.Canceled) {
		t.Fatalf("put with a cancelled context: %v", err)
	}
	if _, err := s.Head(ctx, "streams/b/large"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a cancelled put left the key: %v", err)
	}
}
