package dir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/objstoretest"
)

func open(t *testing.T) *Bucket {
	t.Helper()
	b, err := Open(t.TempDir(), "bkt")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return open(t) })
}

// TestConformanceNamedTemp: the fallback where a filesystem has no
// anonymous files (and every platform but Linux) stages named temp files.
func TestConformanceNamedTemp(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		b := open(t)
		b.anon = false
		return b
	})
}

func TestConformanceWithFaultWrapper(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return objstore.WithFaults(open(t), objstore.NewInjector(1))
	})
}

func TestLayoutIsInspectable(t *testing.T) {
	root := t.TempDir()
	b, err := Open(root, "data")
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "data" || b.Root() != filepath.Join(root, "data") {
		t.Fatalf("Name %q Root %q", b.Name(), b.Root())
	}
	key := "chains/star-0/00000000000000000001/00000000000000000007"
	if err := b.PutIfAbsent(context.Background(), key, []byte("envelope")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "data", "chains", "star-0", "00000000000000000001", "00000000000000000007"))
	if err != nil {
		t.Fatalf("object is not a plain file at its key: %v", err)
	}
	if string(got) != "envelope" {
		t.Fatalf("file holds %q", got)
	}
	tmp, err := os.ReadDir(filepath.Join(root, "data", ".tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tmp) != 0 {
		t.Fatalf("temp files left after a successful put: %v", tmp)
	}
	// Deleting the only object prunes its now-empty directories.
	if err := b.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "data", "chains")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty parent directories not pruned: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "data", ".tmp")); err != nil {
		t.Fatalf(".tmp folder must survive pruning: %v", err)
	}
}

func TestOpenRejectsBadBucketNames(t *testing.T) {
	for _, name := range []string{"", ".", "..", "a/b", "../x", "a\x00b"} {
		if _, err := Open(t.TempDir(), name); err == nil {
			t.Errorf("Open(%q) succeeded", name)
		}
	}
}

func TestKeyValidation(t *testing.T) {
	ctx := context.Background()
	b := open(t)
	// A file outside the bucket that an escaping key would reach.
	outside := filepath.Join(filepath.Dir(b.Root()), "secret")
	if err := os.WriteFile(outside, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := []string{
		"", "/abs", "/etc/passwd", "..", "../secret", "a/../../secret", "a/..", "./a", "a/./b",
		"a//b", "a/", "trailing/", ".tmp", ".tmp/put-1", "a\x00b",
	}
	for _, key := range bad {
		if err := ValidKey(key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidKey(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := b.PutIfAbsent(ctx, key, []byte("x")); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("PutIfAbsent(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Get(ctx, key, 0, -1); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Head(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Head(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := b.Delete(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	if got, err := os.ReadFile(outside); err != nil || string(got) != "outside" {
		t.Fatalf("file outside the bucket changed: %q, %v", got, err)
	}
	if _, err := b.List(ctx, "../"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("List(../) = %v, want ErrInvalidKey", err)
	}
	// Keys that look odd but are fine.
	good := []string{"a", ".hidden", "c/.tmp/b", "d/.tmp", "..a", "a..", "x/y.z", "tmp", ".tmpx"}
	for _, key := range good {
		if err := ValidKey(key); err != nil {
			t.Errorf("ValidKey(%q) = %v, want nil", key, err)
		}
		if err := b.PutIfAbsent(ctx, key, []byte(key)); err != nil {
			t.Errorf("PutIfAbsent(%q) = %v", key, err)
		}
	}
	keys, err := b.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(good))
	if !slices.Equal(keys, want) {
		t.Fatalf("List = %q, want %q", keys, want)
	}
}

func TestKeyConflict(t *testing.T) {
	ctx := context.Background()
	b := open(t)
	if err := b.PutIfAbsent(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "a", []byte("y")); !errors.Is(err, ErrKeyConflict) {
		t.Fatalf("put over a directory: %v, want ErrKeyConflict", err)
	}
	if _, err := b.Get(ctx, "a", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get of a directory: %v, want ErrNotFound", err)
	}
	if _, err := b.Head(ctx, "a"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head of a directory: %v, want ErrNotFound", err)
	}
	if err := b.Delete(ctx, "a"); err != nil {
		t.Fatalf("Delete of a directory: %v", err)
	}
	if got, err := b.Get(ctx, "a/b", 0, -1); err != nil || string(got) != "x" {
		t.Fatalf("Delete of the directory touched a/b: %q, %v", got, err)
	}
	if err := b.PutIfAbsent(ctx, "a/b/c", []byte("z")); !errors.Is(err, ErrKeyConflict) {
		t.Fatalf("put under an object: %v, want ErrKeyConflict", err)
	}
	if _, err := b.Get(ctx, "a/b/c", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get under an object: %v, want ErrNotFound", err)
	}
}

// A crash after the temp file is written but before the link leaves a body
// in .tmp. It must never be visible as an object, must not block writing
// the key, and RemoveTemp clears it.
func TestLeftoverTempIsInvisible(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, err := Open(root, "bkt")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(ctx, "chains/k", []byte("real")); err != nil {
		t.Fatal(err)
	}
	// Simulate the crash: a fully written, synced temp body that was never
	// linked, plus a half-written one.
	tmpName, err := b.writeTemp([]byte("crashed body for chains/k2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.Root(), ".tmp", "put-torn"), []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Reopening (a restart) does not turn them into objects.
	b, err = Open(root, "bkt")
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"", ".", ".tmp", ".tmp/", "chains/"} {
		keys, err := b.List(ctx, prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		for _, k := range keys {
			if k != "chains/k" {
				t.Fatalf("List(%q) shows %q", prefix, k)
			}
		}
	}
	if _, err := b.Get(ctx, ".tmp/"+filepath.Base(tmpName), 0, -1); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Get of the temp file: %v, want ErrInvalidKey", err)
	}
	if _, err := b.Head(ctx, "chains/k2"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head of the crashed key: %v, want ErrNotFound", err)
	}
	// The crashed write's key is still free.
	if err := b.PutIfAbsent(ctx, "chains/k2", []byte("retried")); err != nil {
		t.Fatalf("put after crash: %v", err)
	}
	if got, err := b.Get(ctx, "chains/k2", 0, -1); err != nil || string(got) != "retried" {
		t.Fatalf("Get after crash: %q, %v", got, err)
	}
	n, err := b.RemoveTemp()
	if err != nil || n != 2 {
		t.Fatalf("RemoveTemp = %d, %v; want 2, nil", n, err)
	}
	if keys, _ := b.List(ctx, ""); !slices.Equal(keys, []string{"chains/k", "chains/k2"}) {
		t.Fatalf("objects after RemoveTemp: %q", keys)
	}
}

// Concurrent put and delete on keys sharing a directory: Delete prunes the
// directory while PutIfAbsent links into it. Every put must succeed.
func TestPutRacesPrune(t *testing.T) {
	ctx := context.Background()
	b := open(t)
	for round := range 100 {
		done := make(chan error, 1)
		if err := b.PutIfAbsent(ctx, "p/q/a", []byte("a")); err != nil {
			t.Fatal(err)
		}
		go func() { done <- b.Delete(ctx, "p/q/a") }()
		if err := b.PutIfAbsent(ctx, "p/q/b", []byte("b")); err != nil {
			t.Fatalf("round %d: put while pruning: %v", round, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got, err := b.Get(ctx, "p/q/b", 0, -1); err != nil || string(got) != "b" {
			t.Fatalf("round %d: %q, %v", round, got, err)
		}
		if err := b.Delete(ctx, "p/q/b"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSymlinksNotFollowed: a symlink planted in the bucket folder is not
// an object to Get, as it is not to Head or Delete: the file it points to
// outside the bucket is never read.
func TestSymlinksNotFollowed(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, err := Open(root, "bkt")
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(root, "secret")
	if err := os.WriteFile(outside, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(b.Root(), "link")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "link", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get through a symlink: %q, %v; want ErrNotFound", got, err)
	}
	if _, err := b.Head(ctx, "link"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Head of a symlink: %v, want ErrNotFound", err)
	}
}
