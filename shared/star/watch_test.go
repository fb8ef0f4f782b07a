package star

import (
	"context"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

// WatchStream wakes on its own stream's releases (and its drain), not on
// the other streams of its loglet.
func TestWatchStreamIsPerStream(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	ids := h.open(metastore.Standard, 2)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	tail, ch, err := h.star.WatchStream(ids[0])
	if err != nil || tail != 0 {
		t.Fatal(tail, err)
	}
	if _, err := h.star.Append(context.Background(), ids[1], recs(2, func(int) []byte { return []byte("b") }), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if closed(ch) {
		t.Fatal("another stream's release woke the watch")
	}
	if _, err := h.star.Append(context.Background(), ids[0], recs(1, func(int) []byte { return []byte("a") }), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if !closed(ch) {
		t.Fatal("the stream's own release did not wake the watch")
	}
	tail, ch, err = h.star.WatchStream(ids[0])
	if err != nil || tail != 1 || closed(ch) {
		t.Fatal(tail, err)
	}
	// Drain wakes it (the stream is leaving: the reader looks again).
	h.star.Absorbed(metastore.ChainID{Star: "star-0", Class: metastore.Standard}, h.star.Released(metastore.ChainID{Star: "star-0", Class: metastore.Standard}))
	if err := h.star.Drain(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if !closed(ch) {
		t.Fatal("drain did not wake the watch")
	}
	if _, _, err := h.star.WatchStream(ids[0]); err == nil {
		t.Fatal("a drained stream can still be watched")
	}
}
