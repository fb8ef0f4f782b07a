package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strandlog/strand/shared/objstore"
)

// Racers is the number of goroutines in the concurrent PutIfAbsent subtest.
const Racers = 48

// Run runs the conformance suite. open returns a fresh, empty bucket each
// time it is called.
func Run(t *testing.T, open func(t *testing.T) objstore.Bucket) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, b objstore.Bucket)
	}{
		{"PutGet", testPutGet},
		{"RangedGet", testRangedGet},
		{"GetInto", testGetInto},
		{"PutGiven", testPutGiven},
		{"View", testView},
		{"PutIfAbsentTwice", testPutIfAbsentTwice},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"Missing", testMissing},
		{"Delete", testDelete},
		{"List", testList},
		{"SlashKeys", testSlashKeys},
		{"EmptyBody", testEmptyBody},
		{"LargeBody", testLargeBody},
		{"NoAliasing", testNoAliasing},
		{"CancelledContext", testCancelledContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			if b == nil {
				t.Fatal("open returned a nil bucket")
			}
			tc.fn(t, b)
		})
	}
}

func put(t *testing.T, b objstore.Bucket, key string, body []byte) {
	t.Helper()
	if err := b.PutIfAbsent(context.Background(), key, body); err != nil {
		t.Fatalf("PutIfAbsent(%q): %v", key, err)
	}
}

func get(t *testing.T, b objstore.Bucket, key string, off, n int64) []byte {
	t.Helper()
	got, err := b.Get(context.Background(), key, off, n)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): %v", key, off, n, err)
	}
	return got
}

func wantBody(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		if len(got) > 64 || len(want) > 64 {
			t.Fatalf("%s: got %d bytes, want %d bytes (contents differ)", what, len(got), len(want))
		}
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func testPutGet(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	body := []byte("hello, strand")
	put(t, b, "k", body)
	wantBody(t, "Get whole", get(t, b, "k", 0, -1), body)
	wantBody(t, "Get exact length", get(t, b, "k", 0, int64(len(body))), body)
	wantBody(t, "Get ranged", get(t, b, "k", 7, 6), []byte("strand"))
	size, err := b.Head(ctx, "k")
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if size != int64(len(body)) {
		t.Fatalf("Head: size %d, want %d", size, len(body))
	}
}

func testRangedGet(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	body := []byte("0123456789")
	put(t, b, "r", body)
	for _, c := range []struct {
		off, n int64
		want   string
	}{
		{0, -1, "0123456789"},
		{0, 1, "0"},
		{2, 3, "234"},
		{3, -1, "3456789"},
		{9, -1, "9"},
		{9, 1, "9"},
		{7, 10, "789"},             // past the end: the short tail, no error
		{0, 1 << 40, "0123456789"}, // far past the end
		{5, -7, "56789"},           // any n < 0 reads to the end
	} {
		wantBody(t, fmt.Sprintf("Get(%d, %d)", c.off, c.n), get(t, b, "r", c.off, c.n), []byte(c.want))
	}
	for _, c := range []struct{ off, n int64 }{{10, 1}, {10, -1}, {11, 1}, {1 << 40, -1}} {
		_, err := b.Get(ctx, "r", c.off, c.n)
		wantErr(t, fmt.Sprintf("Get(%d, %d) at/after end", c.off, c.n), err, objstore.ErrRange)
	}
}

// View (the bucket's own when it has one, objstore.Viewer) reads what
// Get reads: whole, ranged, short at the end, and fails as Get does.
func testView(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	put(t, b, "v", []byte("0123456789"))
	for _, c := range []struct {
		off, n int64
		want   string
	}{
		{0, -1, "0123456789"},
		{2, 3, "234"},
		{7, 10, "789"}, // past the end: the short tail, no error
		{9, -1, "9"},
	} {
		got, err := objstore.View(ctx, b, "v", c.off, c.n)
		if err != nil || string(got) != c.want {
			t.Errorf("View(%d, %d): %q, %v; want %q", c.off, c.n, got, err, c.want)
		}
	}
	_, err := objstore.View(ctx, b, "v", 10, 1)
	wantErr(t, "View at the end", err, objstore.ErrRange)
	_, err = objstore.View(ctx, b, "nope", 0, -1)
	wantErr(t, "View of a missing key", err, objstore.ErrNotFound)
}

// PutGiven (the bucket's own KeepIfAbsent when it has one,
// objstore.Keeper) is PutIfAbsent: it creates the object once, refuses a
// second put at the key with ErrExists and leaves the first, and what a
// caller does to the bytes a read returned does not reach the object.
func testPutGiven(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	if err := objstore.PutGiven(ctx, b, "g", []byte("given body")); err != nil {
		t.Fatalf("PutGiven: %v", err)
	}
	err := objstore.PutGiven(ctx, b, "g", []byte("other body"))
	wantErr(t, "PutGiven at a taken key", err, objstore.ErrExists)
	got, err := b.Get(ctx, "g", 0, -1)
	if err != nil || string(got) != "given body" {
		t.Fatalf("Get after PutGiven: %q, %v", got, err)
	}
	got[0] = 'X'
	if again, err := b.Get(ctx, "g", 0, -1); err != nil || string(again) != "given body" {
		t.Fatalf("a write to a read's bytes reached the object: %q, %v", again, err)
	}
	if err := objstore.PutGiven(ctx, b, "empty", nil); err != nil {
		t.Fatalf("PutGiven of an empty body: %v", err)
	}
	if n, err := b.Head(ctx, "empty"); err != nil || n != 0 {
		t.Fatalf("Head of an empty given body: %d, %v", n, err)
	}
}

// GetInto (the bucket's own when it has one, objstore.ReaderInto) reads
// what Get reads into the caller's buffer: up to its length, fewer where
// the object ends, and fails as Get does.
func testGetInto(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	body := []byte("0123456789")
	put(t, b, "r", body)
	for _, c := range []struct {
		off  int64
		size int
		want string
	}{
		{0, 10, "0123456789"},
		{0, 1, "0"},
		{2, 3, "234"},
		{9, 1, "9"},
		{7, 10, "789"}, // past the end: the short tail, no error
		{0, 64, "0123456789"},
	} {
		dst := bytes.Repeat([]byte{'x'}, c.size)
		n, err := objstore.GetInto(ctx, b, "r", c.off, dst)
		if err != nil || string(dst[:n]) != c.want {
			t.Errorf("GetInto(%d, %d bytes): %q, %v; want %q", c.off, c.size, dst[:n], err, c.want)
		}
		if strings.Trim(string(dst[n:]), "x") != "" {
			t.Errorf("GetInto(%d, %d bytes) wrote past the %d bytes it read: %q", c.off, c.size, n, dst)
		}
	}
	for _, off := range []int64{10, 11, 1 << 40} {
		_, err := objstore.GetInto(ctx, b, "r", off, make([]byte, 4))
		wantErr(t, fmt.Sprintf("GetInto(%d) at/after end", off), err, objstore.ErrRange)
	}
	_, err := objstore.GetInto(ctx, b, "nope", 0, make([]byte, 4))
	wantErr(t, "GetInto of a missing key", err, objstore.ErrNotFound)
	large := bytes.Repeat([]byte("abcdefgh"), 512<<10) // 4 MiB, read in two halves
	put(t, b, "large", large)
	dst := make([]byte, len(large))
	half := len(large) / 2
	for _, lo := range []int{0, half} {
		n, err := objstore.GetInto(ctx, b, "large", int64(lo), dst[lo:lo+half])
		if err != nil || n != half {
			t.Fatalf("GetInto of half of 4 MiB at %d: %d bytes, %v", lo, n, err)
		}
	}
	if !bytes.Equal(dst, large) {
		t.Error("GetInto of 4 MiB in two halves: the bytes differ")
	}
}

func testPutIfAbsentTwice(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	put(t, b, "once", []byte("first"))
	err := b.PutIfAbsent(ctx, "once", []byte("second, longer body"))
	wantErr(t, "second PutIfAbsent", err, objstore.ErrExists)
	// Writing the same body again is still ErrExists: the store does not
	// compare bodies (that is the caller's job when resolving ambiguity).
	err = b.PutIfAbsent(ctx, "once", []byte("first"))
	wantErr(t, "PutIfAbsent with the same body", err, objstore.ErrExists)
	wantBody(t, "body after second put", get(t, b, "once", 0, -1), []byte("first"))
}

func testPutIfAbsentRace(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	const key = "race/new-key"
	bodies := make([][]byte, Racers)
	for i := range bodies {
		// Distinct bodies of distinct lengths, so a mix-up shows.
		bodies[i] = bytes.Repeat([]byte(fmt.Sprintf("racer-%02d;", i)), i+1)
	}
	errs := make([]error, Racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range Racers {
		wg.Go(func() {
			<-start
			errs[i] = b.PutIfAbsent(ctx, key, bodies[i])
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("racers %d and %d both created %q", winner, i, key)
			}
			winner = i
		case errors.Is(err, objstore.ErrExists):
		default:
			t.Fatalf("racer %d: got %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no racer created %q", key)
	}
	wantBody(t, fmt.Sprintf("body of winner %d", winner), get(t, b, key, 0, -1), bodies[winner])
}

func testMissing(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	_, err := b.Get(ctx, "missing", 0, -1)
	wantErr(t, "Get missing", err, objstore.ErrNotFound)
	_, err = b.Get(ctx, "missing", 3, 4)
	wantErr(t, "ranged Get missing", err, objstore.ErrNotFound)
	_, err = b.Head(ctx, "missing")
	wantErr(t, "Head missing", err, objstore.ErrNotFound)
	_, err = b.Head(ctx, "missing/with/slashes")
	wantErr(t, "Head missing with slashes", err, objstore.ErrNotFound)
	// A key under an existing object's name is a different, missing key.
	put(t, b, "present", []byte("x"))
	_, err = b.Get(ctx, "present-not", 0, -1)
	wantErr(t, "Get of a longer missing key", err, objstore.ErrNotFound)
}

func testDelete(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	if err := b.Delete(ctx, "never-existed"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	put(t, b, "d/k", []byte("old"))
	put(t, b, "d/keep", []byte("keep"))
	if err := b.Delete(ctx, "d/k"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := b.Get(ctx, "d/k", 0, -1)
	wantErr(t, "Get after Delete", err, objstore.ErrNotFound)
	_, err = b.Head(ctx, "d/k")
	wantErr(t, "Head after Delete", err, objstore.ErrNotFound)
	if err := b.Delete(ctx, "d/k"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	wantBody(t, "sibling after Delete", get(t, b, "d/keep", 0, -1), []byte("keep"))
	put(t, b, "d/k", []byte("new body"))
	wantBody(t, "recreated key", get(t, b, "d/k", 0, -1), []byte("new body"))
	// Deleting the last key under a prefix and writing below it again works.
	for _, k := range []string{"d/k", "d/keep"} {
		if err := b.Delete(ctx, k); err != nil {
			t.Fatalf("Delete(%q): %v", k, err)
		}
	}
	put(t, b, "d/k", []byte("third"))
	wantBody(t, "recreated after emptying the prefix", get(t, b, "d/k", 0, -1), []byte("third"))
}

func testList(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	// Inserted out of order. "a-c" < "a/b" < "a0" in byte order, which a
	// directory walk does not give on its own.
	// No key is also a directory of another ("b" and "b/x"): S3 allows it,
	// a filesystem store cannot, and strand's key layout never does it.
	keys := []string{"a0", "a/b", "b/x/y", "a-c", "a/a/z", "ab", "a/b2", "b."}
	for _, k := range keys {
		put(t, b, k, []byte(k))
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a-c", "a/a/z", "a/b", "a/b2", "a0", "ab", "b.", "b/x/y"}},
		{"a", []string{"a-c", "a/a/z", "a/b", "a/b2", "a0", "ab"}},
		{"a/", []string{"a/a/z", "a/b", "a/b2"}},
		{"a/b", []string{"a/b", "a/b2"}},
		{"b/", []string{"b/x/y"}},
		{"b/x/y", []string{"b/x/y"}},
		{"c", nil},
		{"a/q/", nil},
	} {
		got, err := b.List(ctx, c.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", c.prefix, err)
		}
		if len(got) != len(c.want) || (len(got) > 0 && !slices.Equal(got, c.want)) {
			t.Fatalf("List(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
}

func testSlashKeys(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	const base = "chains/star-0/00000000000000000001/"
	var want []string
	for i := 7; i >= 1; i-- {
		k := fmt.Sprintf("%s%020d", base, i)
		put(t, b, k, []byte(k))
		want = append(want, k)
	}
	other := "chains/star-1/00000000000000000001/00000000000000000007"
	put(t, b, other, []byte("other"))
	slices.Sort(want)
	for _, k := range want {
		wantBody(t, "Get "+k, get(t, b, k, 0, -1), []byte(k))
	}
	wantBody(t, "Get "+other, get(t, b, other, 0, -1), []byte("other"))
	got, err := b.List(ctx, base)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, want %q", base, got, want)
	}
	err = b.PutIfAbsent(ctx, want[0], []byte("again"))
	wantErr(t, "PutIfAbsent on an existing slash key", err, objstore.ErrExists)
}

func testEmptyBody(t *testing.T, b objstore.Bucket) {
	ctx := context.Background()
	put(t, b, "empty", nil)
	size, err := b.Head(ctx, "empty")
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if size != 0 {
		t.Fatalf("Head: size %d, want 0", size)
	}
	got := get(t, b, "empty", 0, -1)
	if len(got) != 0 {
		t.Fatalf("Get: %d bytes, want 0", len(got))
	}
	err = b.PutIfAbsent(ctx, "empty", []byte("not empty"))
	wantErr(t, "PutIfAbsent over an empty object", err, objstore.ErrExists)
	put(t, b, "empty2", []byte{})
	if size, err := b.Head(ctx, "empty2"); err != nil || size != 0 {
		t.Fatalf("Head of a []byte{} body: %d, %v; want 0, nil", size, err)
	}
}

func testLargeBody(t *testing.T, b objstore.Bucket) {
	const size = 5 << 20
	body := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < size; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			body[i+j] = byte(v >> (8 * j))
		}
	}
	put(t, b, "large", body)
	if got, err := b.Head(context.Background(), "large"); err != nil || got != size {
		t.Fatalf("Head: %d, %v; want %d, nil", got, err, size)
	}
	wantBody(t, "Get whole", get(t, b, "large", 0, -1), body)
	off, n := int64(3<<20+17), int64(1<<20+3)
	wantBody(t, "Get middle", get(t, b, "large", off, n), body[off:off+n])
	wantBody(t, "Get tail", get(t, b, "large", size-5, 100), body[size-5:])
}

// NoAliasing: PutIfAbsent's body is lent (the package's contract): a
// write to it after the put returned, or to a read's bytes, does not
// reach the object (settle reuses its object buffers, ADR 0072).
func testNoAliasing(t *testing.T, b objstore.Bucket) {
	body := []byte("original")
	put(t, b, "alias", body)
	copy(body, "XXXXXXXX")
	got := get(t, b, "alias", 0, -1)
	wantBody(t, "after the caller changed its slice", got, []byte("original"))
	copy(got, "YYYYYYYY")
	wantBody(t, "after the caller changed a returned slice", get(t, b, "alias", 0, -1), []byte("original"))
}

func testCancelledContext(t *testing.T, b objstore.Bucket) {
	live := context.Background()
	put(t, b, "exists", []byte("x"))
	ctx, cancel := context.WithCancel(live)
	cancel()

	if err := b.PutIfAbsent(ctx, "cancelled", []byte("body")); err == nil {
		t.Fatal("PutIfAbsent with a cancelled context succeeded")
	}
	_, err := b.Head(live, "cancelled")
	wantErr(t, "Head of a key put under a cancelled context", err, objstore.ErrNotFound)

	if _, err := b.Get(ctx, "exists", 0, -1); err == nil {
		t.Fatal("Get with a cancelled context succeeded")
	}
	if _, err := b.Head(ctx, "exists"); err == nil {
		t.Fatal("Head with a cancelled context succeeded")
	}
	if _, err := b.List(ctx, ""); err == nil {
		t.Fatal("List with a cancelled context succeeded")
	}
	if err := b.Delete(ctx, "exists"); err == nil {
		t.Fatal("Delete with a cancelled context succeeded")
	}
	wantBody(t, "object after a cancelled Delete", get(t, b, "exists", 0, -1), []byte("x"))
}
