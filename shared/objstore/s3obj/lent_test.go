package s3obj

import (
	"errors"
	"io"
	"testing"
)

// A put's body reads as the caller's bytes until the put ends; after it,
// every read and seek fails with errReturned and nothing of the buffer is
// copied out (ADR 0072: the caller may reuse it).
func TestLentBodyEnds(t *testing.T) {
	buf := []byte("settled object")
	l := lend(buf)
	head := make([]byte, 7)
	if n, err := io.ReadFull(l, head); err != nil || string(head[:n]) != "settled" || l.Len() != 7 {
		t.Fatalf("read before the end: %q, %v, %d left", head[:n], err, l.Len())
	}
	if at, err := l.Seek(0, io.SeekStart); err != nil || at != 0 {
		t.Fatalf("seek before the end: %d, %v", at, err)
	}
	l.end()
	copy(buf, "XXXXXXXXXXXXXX") // the caller's again
	p := make([]byte, 4)
	if n, err := l.Read(p); n != 0 || !errors.Is(err, errReturned) || string(p) != "\x00\x00\x00\x00" {
		t.Fatalf("read after the end: %d %q, %v", n, p, err)
	}
	if _, err := l.Seek(0, io.SeekStart); !errors.Is(err, errReturned) {
		t.Fatalf("seek after the end: %v", err)
	}
	if l.Len() != 0 {
		t.Fatalf("Len after the end: %d", l.Len())
	}
}
