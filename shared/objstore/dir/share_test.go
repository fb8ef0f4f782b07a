package dir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/strandlog/strand/shared/objstore"
)

// openSet opens buckets named names under one root, as strand dev opens
// its Express set.
func openSet(t *testing.T, names ...string) []*Bucket {
	t.Helper()
	root := t.TempDir()
	var out []*Bucket
	for _, n := range names {
		b, err := Open(root, n)
		if err != nil {
			t.Fatal(err)
		}
		if !b.anon {
			t.Skip("no anonymous files (O_TMPFILE and /proc) on this filesystem: nothing is shared")
		}
		out = append(out, b)
	}
	return out
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(fa, fb)
}

func mustGet(t *testing.T, b *Bucket, key string) []byte {
	t.Helper()
	got, err := b.Get(context.Background(), key, 0, -1)
	if err != nil {
		t.Fatalf("Get %s/%s: %v", b.Name(), key, err)
	}
	return got
}

// TestSharedBodies: the buckets under one root share a key's staged body
// when the bytes are the same (one inode, a name in each bucket), and
// never when they differ; each name lives on its own.
func TestSharedBodies(t *testing.T) {
	ctx := context.Background()
	set := openSet(t, "express-0", "express-1", "express-2")
	a, b, c := set[0], set[1], set[2]
	body := bytes.Repeat([]byte("flight "), 1000)
	for _, bk := range set {
		if err := bk.PutIfAbsent(ctx, "chains/s/1/1", body); err != nil {
			t.Fatal(err)
		}
	}
	if !sameFile(t, a.path("chains/s/1/1"), b.path("chains/s/1/1")) || !sameFile(t, a.path("chains/s/1/1"), c.path("chains/s/1/1")) {
		t.Fatal("the same bytes under the same key were written three times")
	}
	// A second put of the key to a bucket that has it: refused as always.
	if err := b.PutIfAbsent(ctx, "chains/s/1/1", body); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second put: %v, want ErrExists", err)
	}

	// Different bytes under the same key (a poison against a flight).
	poison := bytes.Repeat([]byte("poison "), 1000) // same length
	if err := a.PutIfAbsent(ctx, "chains/s/1/2", body); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "chains/s/1/2", poison); err != nil {
		t.Fatal(err)
	}
	if sameFile(t, a.path("chains/s/1/2"), b.path("chains/s/1/2")) {
		t.Fatal("different bytes share a file")
	}
	if !bytes.Equal(mustGet(t, a, "chains/s/1/2"), body) || !bytes.Equal(mustGet(t, b, "chains/s/1/2"), poison) {
		t.Fatal("a copy holds the other's bytes")
	}

	// The caller's buffer changed between the puts: the second bucket
	// gets the bytes it was given.
	buf := bytes.Clone(body)
	if err := a.PutIfAbsent(ctx, "chains/s/1/3", buf); err != nil {
		t.Fatal(err)
	}
	buf[7] ^= 0xff
	if err := b.PutIfAbsent(ctx, "chains/s/1/3", buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustGet(t, a, "chains/s/1/3"), body) || !bytes.Equal(mustGet(t, b, "chains/s/1/3"), buf) {
		t.Fatal("a put took bytes it was not given")
	}

	// Each name lives on its own: deleting one copy leaves the others.
	if err := a.Delete(ctx, "chains/s/1/1"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustGet(t, c, "chains/s/1/1"), body) {
		t.Fatal("deleting one copy changed another")
	}
	// Every name of a shared file deleted, the key written again with the
	// same bytes: the file cannot be linked any more, the body is staged
	// anew.
	for _, bk := range []*Bucket{b, c} {
		if err := bk.Delete(ctx, "chains/s/1/1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, bk := range set {
		if err := bk.PutIfAbsent(ctx, "chains/s/1/1", body); err != nil {
			t.Fatalf("put after every copy was deleted: %v", err)
		}
		if !bytes.Equal(mustGet(t, bk, "chains/s/1/1"), body) {
			t.Fatal("rewritten copy differs")
		}
	}
	if left, _ := os.ReadDir(a.tmp); len(left) != 0 {
		t.Fatalf("files left in .tmp: %v", left)
	}
}

// TestSharedBodiesConcurrent: the copies of many keys put at once to a
// set of three, some with a different body in one bucket, each copy
// holding exactly its own bytes; more keys than the cache keeps.
func TestSharedBodiesConcurrent(t *testing.T) {
	ctx := context.Background()
	set := openSet(t, "x0", "x1", "x2")
	const keys = 3 * shareKeep
	body := func(k, bucket int) []byte {
		if k%5 == 0 && bucket == 2 {
			return []byte(fmt.Sprintf("poison %04d", k)) // same length as a flight's
		}
		return []byte(fmt.Sprintf("flight %04d", k))
	}
	var wg sync.WaitGroup
	errs := make(chan error, keys*len(set))
	for k := range keys {
		for i, bk := range set {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- bk.PutIfAbsent(ctx, fmt.Sprintf("chains/s/1/%d", k), body(k, i))
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for k := range keys {
		for i, bk := range set {
			if got := mustGet(t, bk, fmt.Sprintf("chains/s/1/%d", k)); !bytes.Equal(got, body(k, i)) {
				t.Fatalf("key %d bucket %d holds %q, want %q", k, i, got, body(k, i))
			}
		}
	}
	sh := set[0].share
	sh.mu.Lock()
	n, m := len(sh.fifo), len(sh.byKey)
	sh.mu.Unlock()
	if n > shareKeep || m > shareKeep {
		t.Fatalf("the cache keeps %d bodies (%d keys), at most %d", n, m, shareKeep)
	}
	if _, err := os.Stat(filepath.Join(set[0].Root(), "chains")); err != nil {
		t.Fatal(err)
	}
}
