package objstore

import (
	"bytes"
	"testing"
)

// A body is copied whole in pieces of copyPiece, with a yield between two
// pieces (none after the last), whatever its length.
func TestCopyYielding(t *testing.T) {
	yields := 0
	old := gosched
	gosched = func() { yields++ }
	defer func() { gosched = old }()
	for _, n := range []int{0, 1, copyPiece - 1, copyPiece, copyPiece + 1, 3*copyPiece + 17} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + 3)
		}
		for _, dn := range []int{n, n / 2} {
			yields = 0
			dst := make([]byte, dn)
			got := copyYielding(dst, src)
			if got != min(n, dn) || !bytes.Equal(dst, src[:got]) {
				t.Fatalf("copy of %d bytes into %d: copied %d, equal %v", n, dn, got, bytes.Equal(dst, src[:got]))
			}
			if want := max(0, (got+copyPiece-1)/copyPiece-1); yields != want {
				t.Fatalf("copy of %d bytes: %d yields, want %d", got, yields, want)
			}
		}
	}
	// Through a put and a get: the stored body is the body.
	m := NewMem("m")
	body := bytes.Repeat([]byte("strand"), copyPiece/2)
	if err := m.PutIfAbsent(t.Context(), "k", body); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Get(t.Context(), "k", 0, -1); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("get after a put in pieces: %v, equal %v", err, bytes.Equal(got, body))
	}
}
