//go:build linux

package dir

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// spareCount is how many spares dir holds now.
func spareCount(dir string) int {
	spares.mu.Lock()
	defer spares.mu.Unlock()
	if d := spares.dirs[dir]; d != nil {
		return len(d.files)
	}
	return 0
}

// waitSpares waits until dir holds want spares.
func waitSpares(t *testing.T, dir string, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for spareCount(dir) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d spare files after 5 s, want %d", dir, spareCount(dir), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPutTakesASpareFile: a staging directory keeps spareFiles empty
// anonymous files opened ahead; a put stages its body in one of them (the
// O_TMPFILE open, which waits on the journal, is off its path) and the
// spare is replaced in the background. The object reads back whole, and a
// spare is never linked as an object. Before spares every put opened its
// own file (no spares were held: failed).
func TestPutTakesASpareFile(t *testing.T) {
	b, err := Open(t.TempDir(), "bkt")
	if err != nil {
		t.Fatal(err)
	}
	if !b.anon {
		t.Skip("no anonymous files (O_TMPFILE and /proc) on this filesystem")
	}
	ctx := context.Background()
	waitSpares(t, b.tmp, spareFiles) // Open's probe started the refill
	spares.mu.Lock()
	next := spares.dirs[b.tmp].files[spareFiles-1]
	spares.mu.Unlock()
	fd := next.Fd()
	if err := b.PutIfAbsent(ctx, "k/1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	// The put took the last spare; the refill replaced it with a new one.
	waitSpares(t, b.tmp, spareFiles)
	spares.mu.Lock()
	for _, f := range spares.dirs[b.tmp].files {
		if f == next {
			t.Errorf("spare fd %d still listed after a put took it", fd)
		}
	}
	spares.mu.Unlock()
	if got, err := b.Get(ctx, "k/1", 0, -1); err != nil || string(got) != "one" {
		t.Fatalf("get k/1: %q, %v", got, err)
	}
	keys, err := b.List(ctx, "")
	if err != nil || len(keys) != 1 {
		t.Fatalf("list: %v, %v; want only k/1", keys, err)
	}
	for i := range 2 * spareFiles {
		if err := b.PutIfAbsent(ctx, fmt.Sprintf("k/%d", i+2), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if ents, err := os.ReadDir(b.tmp); err != nil || len(ents) != 0 {
		t.Fatalf(".tmp holds %d entries (%v): spares are in no directory", len(ents), err)
	}
}

// TestSpareDirsBounded: spares are kept for at most spareDirs staging
// directories; the least recently used one's are closed.
func TestSpareDirsBounded(t *testing.T) {
	var first *Bucket
	var held []*os.File
	for i := range spareDirs + 3 {
		b, err := Open(t.TempDir(), "bkt")
		if err != nil {
			t.Fatal(err)
		}
		if !b.anon {
			t.Skip("no anonymous files (O_TMPFILE and /proc) on this filesystem")
		}
		if i == 0 {
			first = b
			waitSpares(t, b.tmp, spareFiles)
			spares.mu.Lock()
			held = append(held, spares.dirs[b.tmp].files...)
			spares.mu.Unlock()
		}
	}
	spares.mu.Lock()
	n, kept := len(spares.dirs), spares.dirs[first.tmp]
	spares.mu.Unlock()
	if n > spareDirs || kept != nil {
		t.Fatalf("spares for %d directories (the first one kept: %v), want at most %d without the first", n, kept != nil, spareDirs)
	}
	for _, f := range held {
		if f.Fd() != ^uintptr(0) {
			t.Errorf("an evicted spare (fd %d) is still open", f.Fd())
		}
	}
	// The first directory still works: its next put opens its own file.
	if err := first.PutIfAbsent(context.Background(), "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
}
