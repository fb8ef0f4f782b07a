package star

import (
	"cmp"
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

// carryTables returns the carried tables of the flight being cut from
// batches: for each of its streams whose turn it is and whose table holds
// an acknowledged batch. nil (no allocation) when none. Called with l.mu
// held, at the cut, before the flight's batches can be released.
func (l *loglet) carryTables(batches []*batch, nowMs int64) []carriedTable {
	l.cuts++
	var out []carriedTable
	for _, b := range batches {
		st := b.st
		if st.cutMark == l.cuts {
			continue // the stream's segment of this flight is counted
		}
		st.cutMark = l.cuts
		st.sinceCarry++
		if st.dd == nil || (st.carriedGen == l.carryGen && st.sinceCarry < CarryEvery) {
			continue
		}
		marks := st.dd.carried(st.ackedNext, nowMs)
		if len(marks) == 0 {
			continue
		}
		st.carriedGen, st.sinceCarry = l.carryGen, 0
		out = append(out, carriedTable{st: st, below: st.ackedNext, marks: marks})
	}
	return out
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
// loglet's mu.
func (d *dedupe) carried(below uint64, nowMs int64) []format.PassMark {
	d.lru.mu.Lock()
	defer d.lru.mu.Unlock()
	var ms []metastore.ProducerMark
	for _, p := range d.ps {
		if nowMs-p.lastMs > d.idle {
			continue // expired: check forgets it
		}
		for _, e := range p.ring {
			if e.b == nil && e.ack.LastSeq < below && e.ack.FirstSeq <= e.ack.LastSeq {
				ms = append(ms, metastore.ProducerMark{Producer: p.id, BatchSeq: e.seq, FirstSeq: e.ack.FirstSeq, LastSeq: e.ack.LastSeq})
			}
		}
	}
	if len(ms) == 0 {
		return nil
	}
	slices.SortFunc(ms, func(a, b metastore.ProducerMark) int { return cmp.Compare(a.FirstSeq, b.FirstSeq) })
	// Distinct batches have disjoint seqs; keep the table valid whatever
	// a seeded state held (a mark overlapping its predecessor is dropped).
	kept := ms[:1]
	for _, m := range ms[1:] {
		if m.FirstSeq > kept[len(kept)-1].LastSeq {
			kept = append(kept, m)
		}
	}
	return metastore.PassMarks(metastore.TrimMarks(kept))
}
