package star

import (
	"container/heap"
	"slices"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Carried tables (ADR 0062): the star writes a stream's dedupe table of
// acknowledged batches into one of the stream's flights, apart from the
// flight's own batch table, so a successor finds every producer the star
// remembered in the stream's last parts however many parts ago its batch
// was committed, across any number of takeovers.
//
// A stream carries its table in its first flight after an open (or an
// epoch's recovery) in which the table holds an acknowledged batch, then
// in at least every CarryEvery-th flight of the stream. Each part holds
// at least one of the stream's flights, so the newest carried table is
// in the stream's last CarryEvery parts (RecoverStream looks for it in the
// last RecoverRefs >= CarryEvery). The table holds only released batches
// (never one in flight: a flight of the same cut may still be disowned),
// and records the stream's acknowledged tail when it was taken (Below):
// every batch at or above it is in the own marks of the parts holding it,
// which RecoverStream reads back to.
const CarryEvery = RecoverRefs / 2

// carriedTable is one stream's table in a flight.
type carriedTable struct {
	st    *stream
	below uint64
	marks []format.PassMark
}

// beginCut starts counting a flight's carried tables: admitted, called by
// the cut for each batch it takes, collects them in l.cutCarried. Called
// with l.mu held, before the cut.
func (l *loglet) beginCut(nowMs int64) {
	l.cuts++
	l.cutNowMs, l.cutCarried = nowMs, nil
}

// admitted takes the carried table of b's stream into the flight being cut
// when b is the stream's first batch in it, it is the stream's turn and
// its table holds an acknowledged batch, and returns the table's encoded
// bytes (0 otherwise), which the cut counts toward the flight's size: a
// flight whose streams carry cuts sooner, so it is at most its target
// plus one batch plus one table (40,976 bytes), however many of its
// streams carry (TestReviewCarriedTablesKeepFlightsNearTheTarget). The
// cadence counts the stream's flights, so cutting sooner never delays a
// table. Called with l.mu held, by pool.cut, before the flight's batches
// can be released.
func (l *loglet) admitted(b *batch) int {
	st := b.st
	if st.cutMark == l.cuts {
		return 0 // the stream's segment of this flight is counted
	}
	st.cutMark = l.cuts
	st.sinceCarry++
	if st.dd == nil || (st.carriedGen == l.carryGen && st.sinceCarry < CarryEvery) {
		return 0
	}
	marks := st.dd.carried(st.ackedNext, l.cutNowMs)
	if len(marks) == 0 {
		return 0
	}
	st.carriedGen, st.sinceCarry = l.carryGen, 0
	l.cutCarried = append(l.cutCarried, carriedTable{st: st, below: st.ackedNext, marks: marks})
	return format.CarriedEntrySize(len(marks))
}

// recarry makes every stream of the loglet carry its table in its next
// flight (a new generation): after an epoch's recovery, whose disowned
// flights may have held the last tables. Called with l.mu held.
func (l *loglet) recarry() { l.carryGen++ }

// carried is the table's acknowledged batches (released, not expired),
// below `below` (the stream's acknowledged tail), in seq order, bounded as
// a ref's marks (metastore.TrimMarks: each producer's latest
// MaxMarksPerProducer, the latest MaxRefProducerMarks in all): what a
// flight's carried table may hold (format.CheckCarried). Called with the
// loglet's mu, at a carrying cut: it merges the producers' windows from
// their newest ends (a heap of one cursor per producer), so it costs the
// producers plus the marks it keeps, not a sort of every window
// (BenchmarkCarriedTable).
func (d *dedupe) carried(below uint64, nowMs int64) []format.PassMark {
	d.lru.mu.Lock()
	defer d.lru.mu.Unlock()
	h := make(ringHeap, 0, len(d.ps))
	for _, p := range d.ps {
		if nowMs-p.lastMs > d.idle {
			continue // expired: check forgets it
		}
		if c := (ringCursor{p: p, i: len(p.ring)}); c.prev(below) {
			h = append(h, c)
		}
	}
	if len(h) == 0 {
		return nil
	}
	heap.Init(&h)
	out := make([]format.PassMark, 0, min(metastore.MaxRefProducerMarks, len(h)*metastore.MaxMarksPerProducer))
	for len(h) > 0 && len(out) < metastore.MaxRefProducerMarks {
		c := &h[0]
		e := &c.p.ring[c.i]
		m := format.PassMark{Producer: c.p.id, BatchSeq: e.seq, FirstSeq: e.ack.FirstSeq, LastSeq: e.ack.LastSeq}
		// Distinct batches have disjoint seqs; keep the table valid
		// whatever a seeded state held (an overlapping mark is dropped).
		if n := len(out); n == 0 || m.LastSeq < out[n-1].FirstSeq {
			out = append(out, m)
		}
		if c.taken++; c.taken < metastore.MaxMarksPerProducer && c.prev(below) {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	slices.Reverse(out)
	return out
}

// ringCursor walks one producer's window from its newest end: i is the
// entry it is at, taken how many it gave.
type ringCursor struct {
	p     *producer
	i     int
	taken int
}

// prev moves to the previous acknowledged entry below `below`; false when
// none is left (the window is in batch seq order, so in seq order, with
// its batches in flight at the end).
func (c *ringCursor) prev(below uint64) bool {
	for c.i--; c.i >= 0; c.i-- {
		if e := &c.p.ring[c.i]; e.b == nil && e.ack.LastSeq < below && e.ack.FirstSeq <= e.ack.LastSeq {
			return true
		}
	}
	return false
}

// ringHeap orders cursors by their entry's first seq, newest first.
type ringHeap []ringCursor

func (h ringHeap) Len() int { return len(h) }
func (h ringHeap) Less(i, j int) bool {
	return h[i].p.ring[h[i].i].ack.FirstSeq > h[j].p.ring[h[j].i].ack.FirstSeq
}
func (h ringHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *ringHeap) Push(x any)   { *h = append(*h, x.(ringCursor)) }
func (h *ringHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
