package star

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// TestCarriedHoldsOnlyReleasedBatches: the table a flight carries holds a
// producer's acknowledged batches below the stream's acknowledged tail,
// in seq order, never a batch in flight (a flight of the same cut may
// still be disowned), and within a ref's bounds (8 per producer, even
// with a larger window).
func TestCarriedHoldsOnlyReleasedBatches(t *testing.T) {
	d := newDedupe(12, DefaultProducerIdle, 16, newProducerLRU(1<<20))
	a, b := pid(1), pid(2)
	seq := uint64(0)
	for i := range 10 {
		for _, p := range []format.ProducerID{a, b} {
			bt := &batch{producer: p, batchSeq: uint64(i)}
			d.admit(p, uint64(i), bt, 0)
			d.released(bt, Ack{FirstSeq: seq, LastSeq: seq + 1})
			seq += 2
		}
	}
	pending := &batch{producer: a, batchSeq: 10}
	d.admit(a, 10, pending, 0)
	got := d.carried(seq, 0)
	if len(got) != 2*metastore.MaxMarksPerProducer {
		t.Fatalf("%d marks, want %d (8 per producer)", len(got), 2*metastore.MaxMarksPerProducer)
	}
	if err := format.CheckCarried(got, seq); err != nil {
		t.Fatal(err)
	}
	for _, m := range got {
		if m.Producer == a && m.BatchSeq == 10 {
			t.Fatal("the pending batch is carried")
		}
	}
	if last := got[len(got)-1]; last.Producer != b || last.BatchSeq != 9 || last.FirstSeq != seq-2 {
		t.Fatalf("last mark %+v", last)
	}
	// Below the tail only, and an expired producer is not carried.
	if got := d.carried(4, 0); len(got) != 2 || got[1].LastSeq != 3 {
		t.Fatalf("below seq 4: %+v, want the two first batches", got)
	}
	if got := d.carried(seq, DefaultProducerIdle.Milliseconds()+1); len(got) != 0 {
		t.Fatalf("expired producers carried: %d marks", len(got))
	}
}

// TestFlightsCarryTheTableOnCadence: a stream whose table holds an
// acknowledged batch carries it in its first flight after the open and
// then in at least every CarryEvery-th flight; the tables parse (the
// flight's parser checks them against the segment) and name the batch
// with its ack's seqs.
func TestFlightsCarryTheTableOnCadence(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := sid(3)
	// Opened with a recovered producer: its first flight carries it.
	seeded := ProducerState{ID: pid(9), Batches: []BatchMark{{BatchSeq: 4, FirstSeq: 0, LastSeq: 9}}, LastMs: time.Now().UnixMilli()}
	if err := h.star.Open(StreamInfo{ID: id, Class: metastore.Standard, Next: 10, Producers: []ProducerState{seeded}}); err != nil {
		t.Fatal(err)
	}
	a, err := h.star.Append(ctx, id, recs(5, nil2), AppendOptions{Producer: pid(1), BatchSeq: 0})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 * CarryEvery {
		if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var carriers []uint64
	for slot := uint64(0); ; slot++ {
		obj, err := h.mems[0].Get(ctx, format.SlotKey("star-0", 1, slot), 0, -1)
		if err != nil {
			break
		}
		f, err := format.ParseFlight(obj)
		if err != nil {
			t.Fatalf("slot %d: %v", slot, err)
		}
		for _, c := range f.Carried {
			carriers = append(carriers, slot)
			if c.Marks[0] != (format.PassMark{Producer: pid(9), BatchSeq: 4, FirstSeq: 0, LastSeq: 9}) {
				t.Fatalf("slot %d carries %+v, want the seeded mark first", slot, c.Marks)
			}
			if slot > 0 && (len(c.Marks) != 2 || c.Marks[1].FirstSeq != a.FirstSeq || c.Marks[1].LastSeq != a.LastSeq) {
				t.Fatalf("slot %d carries %+v, want pid(1)'s ack %d-%d too", slot, c.Marks, a.FirstSeq, a.LastSeq)
			}
		}
	}
	if len(carriers) < 4 || carriers[0] != 0 {
		t.Fatalf("carrying slots %v: want the first flight and every %d-th", carriers, CarryEvery)
	}
	for i := 1; i < len(carriers); i++ {
		if carriers[i]-carriers[i-1] > CarryEvery {
			t.Fatalf("carrying slots %v: a gap over %d flights", carriers, CarryEvery)
		}
	}
}

// BenchmarkCarriedTable: taking a stream's table at a carrying cut, under
// the loglet's lock, with the stream's default bound of producers
// (4,096), each with a full window of acknowledged batches: the table is
// sorted and trimmed to 1,024 marks.
func BenchmarkCarriedTable(b *testing.B) {
	for _, producers := range []int{1, 100, DefaultMaxProducers} {
		d := newDedupe(DefaultDedupeWindow, DefaultProducerIdle, DefaultMaxProducers, newProducerLRU(1<<20))
		seq := uint64(0)
		for i := range DefaultDedupeWindow {
			for p := range producers {
				var id format.ProducerID
				id[0], id[1], id[15] = byte(p>>8), byte(p), 1
				bt := &batch{producer: id, batchSeq: uint64(i)}
				d.admit(id, uint64(i), bt, 0)
				d.released(bt, Ack{FirstSeq: seq, LastSeq: seq})
				seq++
			}
		}
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			for b.Loop() {
				if len(d.carried(seq, 0)) == 0 {
					b.Fatal("empty table")
				}
			}
		})
	}
}

// TestRecoveredEpochCarriesAgain: after an epoch's halt and recovery (whose
// disowned flights may have held the newest tables) a stream carries its
// table again in its next flight, whatever its cadence said.
func TestRecoveredEpochCarriesAgain(t *testing.T) {
	var ro atomic.Bool
	h := readOnlyHarness(t, &ro)
	h.start()
	id := h.open(metastore.Express, 1)[0]
	ctx := context.Background()
	for k := range 3 { // the second flight carries batch 0; the third does not
		if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{Producer: pid(1), BatchSeq: uint64(k)}); err != nil {
			t.Fatal(err)
		}
	}
	ro.Store(true)
	if _, err := h.star.Submit(ctx, id, recs(1, nil2), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the halt", func() bool { return !h.star.Health().OK() })
	ro.Store(false)
	waitFor(t, "recovery once writable", func() bool { return h.star.Health().OK() })
	if _, err := h.star.Append(ctx, id, recs(1, nil2), AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	carriers := map[uint64][]uint64{} // epoch: carrying slots
	for epoch := uint64(1); epoch <= 2; epoch++ {
		for slot := uint64(0); ; slot++ {
			obj, err := h.mems[0].Get(ctx, format.SlotKey("star-0", epoch, slot), 0, -1)
			if err != nil {
				break
			}
			if f, err := format.ParseFlight(obj); err == nil && len(f.Carried) > 0 {
				carriers[epoch] = append(carriers[epoch], slot)
			}
		}
	}
	if len(carriers[1]) != 1 || len(carriers[2]) != 1 {
		t.Fatalf("carrying slots by epoch %v: want one in epoch 1 (its second flight) and one after the recovery", carriers)
	}
}
