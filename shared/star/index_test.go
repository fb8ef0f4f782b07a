package star

import (
	"context"
	"fmt"
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
