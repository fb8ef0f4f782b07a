package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// storedSlice is the slice bucket m holds at key (nil: none).
func (m *Mem) storedSlice(key string) []byte {
	b, _ := m.load(key)
	return b
}

// TestMemSetSharesBodies: the buckets of a NewMemSet hold one body for a
// key put with the same bytes into several of them (the K copies of a
// chain slot), and each bucket still behaves as a bucket of its own: the
// caller's later writes, another bucket's delete or other bytes at the
// same key change nothing it returns.
func TestMemSetSharesBodies(t *testing.T) {
	ctx := context.Background()
	set := NewMemSet("a", "b", "c")
	body := []byte("flight bytes")
	for _, m := range set {
		if err := m.PutIfAbsent(ctx, "k", body); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := set[0].storedSlice("k"), set[1].storedSlice("k"), set[2].storedSlice("k")
	if !sameBody(a, b) || !sameBody(a, c) || sameBody(a, body) {
		t.Fatal("the set's copies of one body are not one stored slice apart from the caller's")
	}
	if n := set[0].bodies.m["k"].n; n != 3 {
		t.Fatalf("pooled body held by %d buckets, want 3", n)
	}
	copy(body, "FLIGHT")
	if got, _ := set[1].Get(ctx, "k", 0, -1); string(got) != "flight bytes" {
		t.Fatalf("the caller's write reached a stored body: %q", got)
	}
	// A lost put (the key exists) takes no share.
	if err := set[2].PutIfAbsent(ctx, "k", []byte("flight bytes")); !errors.Is(err, ErrExists) {
		t.Fatalf("second put: %v", err)
	}
	if n := set[0].bodies.m["k"].n; n != 3 {
		t.Fatalf("after a lost put the pooled body is held by %d, want 3", n)
	}
	// Deletes release their shares; the last frees the pooled body.
	if err := set[0].Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got, err := set[1].Get(ctx, "k", 0, -1); err != nil || string(got) != "flight bytes" {
		t.Fatalf("after another bucket's delete: %q, %v", got, err)
	}
	_ = set[1].Delete(ctx, "k")
	_ = set[2].Delete(ctx, "k")
	if len(set[0].bodies.m) != 0 {
		t.Fatalf("pool holds %d bodies after every bucket deleted", len(set[0].bodies.m))
	}
	// Other bytes at one key: each bucket keeps its own.
	if err := set[0].PutIfAbsent(ctx, "j", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := set[1].PutIfAbsent(ctx, "j", []byte("two")); err != nil {
		t.Fatal(err)
	}
	g0, _ := set[0].Get(ctx, "j", 0, -1)
	g1, _ := set[1].Get(ctx, "j", 0, -1)
	if !bytes.Equal(g0, []byte("one")) || !bytes.Equal(g1, []byte("two")) {
		t.Fatalf("different bodies at one key: %q, %q", g0, g1)
	}
	_ = set[1].Delete(ctx, "j") // not the pooled body: the pool's stays
	if e := set[0].bodies.m["j"]; e == nil || e.n != 1 {
		t.Fatalf("deleting an unpooled body released the pooled one: %+v", e)
	}
}

// TestMemSetSharesConcurrentPuts: the K copies of a slot put at the same
// moment (the in-process bench's PUT latency covers the call, so the K
// puts of a flight arrive together) still make one body, copied once,
// not one copy per put that found the pool empty.
func TestMemSetSharesConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	set := NewMemSet("a", "b", "c")
	body := bytes.Repeat([]byte("flight bytes "), 1<<16) // 832 KiB: a copy takes a while
	for i := range 50 {
		key := fmt.Sprintf("slot-%d", i)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, m := range set {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := m.PutIfAbsent(ctx, key, body); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		a, b, c := set[0].storedSlice(key), set[1].storedSlice(key), set[2].storedSlice(key)
		if !sameBody(a, b) || !sameBody(a, c) || !bytes.Equal(a, body) {
			t.Fatalf("put %d: three concurrent puts of one body stored separate copies", i)
		}
		if n := set[0].bodies.m[key].n; n != 3 {
			t.Fatalf("put %d: pooled body held by %d buckets, want 3", i, n)
		}
	}
}

// TestMemKeepsAGivenBody: KeepIfAbsent stores the body it is given, not a
// copy (issue 36: the copy was a third of settle's CPU in `strand
// bench`), PutIfAbsent a copy, and a read copies out of either.
func TestMemKeepsAGivenBody(t *testing.T) {
	ctx := t.Context()
	m := NewMem("m")
	given, copied := []byte("given"), []byte("copied")
	if err := PutGiven(ctx, m, "g", given); err != nil {
		t.Fatal(err)
	}
	if err := m.PutIfAbsent(ctx, "c", copied); err != nil {
		t.Fatal(err)
	}
	if obj, _ := m.load("g"); !sameBody(obj, given) {
		t.Error("KeepIfAbsent stored a copy of the body it was given")
	}
	if obj, _ := m.load("c"); sameBody(obj, copied) {
		t.Error("PutIfAbsent stored the caller's body, not a copy")
	}
	if got, _ := m.Get(ctx, "g", 0, -1); sameBody(got, given) {
		t.Error("Get returned the stored body, not a copy")
	}
}
