package star

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

func TestReadIndexServesTheTailWindow(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	ids := h.open(metastore.Standard, 2)
	for n := 0; n < 10; n++ {
		for _, id := range ids {
			if _, err := h.star.Append(context.Background(), id, recs(3, func(i int) []byte { return fmt.Appendf(nil, "%d", n*3+i) }), AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, low, err := h.star.ReadIndex(ids[1], 7, 5, 1<<20)
	if err != nil || low != 0 || len(got) != 5 {
		t.Fatalf("%d records, low %d, %v", len(got), low, err)
	}
	for i, r := range got {
		if r.Seq != uint64(7+i) || string(r.Body) != fmt.Sprint(7+i) {
			t.Fatalf("record %d = seq %d %q", i, r.Seq, r.Body)
		}
	}
	// A byte limit smaller than one record still returns one.
	if got, _, _ := h.star.ReadIndex(ids[0], 29, 10, 1); len(got) != 1 || got[0].Seq != 29 {
		t.Fatalf("%+v", got)
	}
	// Past the tail: nothing. Absorbed flights leave the index and raise low.
	if got, _, _ := h.star.ReadIndex(ids[0], 30, 10, 1<<20); len(got) != 0 {
		t.Fatalf("read past the tail returned %d records", len(got))
	}
	l := h.star.loglets[metastore.Standard]
	l.mu.Lock()
	mid := l.released[len(l.released)/2]
	l.mu.Unlock()
	h.star.Absorbed(metastore.ChainID{Star: "star-0", Class: metastore.Standard}, metastore.Cursor{Epoch: 1, Slot: mid.slot})
	_, low, _ = h.star.ReadIndex(ids[0], 0, 100, 1<<20)
	if low == 0 || low >= 30 {
		t.Fatalf("after absorbing half the flights, low is %d", low)
	}
	tail, ch, err := h.star.Watch(ids[0])
	if err != nil || tail != 30 || ch == nil {
		t.Fatal(tail, err)
	}
}

// TestReadIndexDecodesOutsideTheLogletLock: ReadIndex decodes (up to 1 MiB
// of records) without holding the loglet mutex that the write path takes
// on every admission and release. Regression test for issue 13 finding 11:
// the decode ran under it.
func TestReadIndexDecodesOutsideTheLogletLock(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	if _, err := h.star.Append(context.Background(), id, recs(5, func(i int) []byte { return []byte("r") }), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	l := h.star.loglets[metastore.Standard]
	held := true
	readIndexDecodeHook = func() {
		if l.mu.TryLock() {
			held = false
			l.mu.Unlock()
		}
	}
	defer func() { readIndexDecodeHook = nil }()
	got, _, err := h.star.ReadIndex(id, 0, 10, 1<<20)
	if err != nil || len(got) != 5 {
		t.Fatalf("%d records, %v", len(got), err)
	}
	if held {
		t.Fatal("ReadIndex decoded while holding the loglet mutex")
	}
}

// TestReadIndexNeverSkipsARecord: when a record does not fit the byte
// limit, the read stops there; it never goes on to a smaller record of the
// next batch (the reader would continue past the skipped one).
func TestReadIndexNeverSkipsARecord(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	for _, bodies := range [][]string{{"small", strings.Repeat("big", 400)}, {"small"}} {
		rs := recs(len(bodies), func(i int) []byte { return []byte(bodies[i]) })
		if _, err := h.star.Append(context.Background(), id, rs, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := h.star.ReadIndex(id, 0, 10, 200)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r.Seq != uint64(i) {
			t.Fatalf("record %d has seq %d: the read skipped a record", i, r.Seq)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d records, want 1 (the big one does not fit 200 bytes)", len(got))
	}
}
