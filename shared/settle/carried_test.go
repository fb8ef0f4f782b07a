package settle_test

import (
	"testing"

	"github.com/strandlog/strand/shared/format"
)

// TestSettleKeepsTheNewestCarriedTable (ADR 0062): stream 0's flights
// each carry a dedupe table (batch k's mark in flight k, below the
// flight's segment); every run and merged run settle writes keeps, in the
// stream's packed entry, the newest table of its slots with its
// acknowledged tail, as it keeps the newest command state.
func TestSettleKeepsTheNewestCarriedTable(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	e.s.Fanout = 3
	e.a.MaxSlotsPerPass = 2
	counts := []int{3, 1}
	flight := 0
	flights := func(n int) {
		for range n {
			e.star.Carried = map[format.StreamID][]format.PassMark{
				e.ids[0]: {{Producer: format.ProducerID{7}, BatchSeq: uint64(flight), FirstSeq: 0, LastSeq: 0}},
			}
			e.flightsWith(1, counts)
			flight++
		}
	}
	// check: the packed entry of stream 0 in p keeps the table of p's
	// last slot (flight EndSlot-1, whose segment starts at 3*(EndSlot-1)).
	check := func(what string, p *format.PassIndex) {
		t.Helper()
		ents := p.FindAll(e.ids[0])
		last := ents[len(ents)-1]
		want := p.EndSlot - 1
		if last.Marker() || len(last.Carried) != 1 || last.Carried[0].BatchSeq != want || last.CarriedBelow != 3*want {
			t.Fatalf("%s %d-%d: stream 0 keeps %+v below %d, want batch %d below %d", what, p.FirstSlot, p.EndSlot, last.Carried, last.CarriedBelow, want, 3*want)
		}
		if other := p.FindAll(e.ids[1]); len(other[len(other)-1].Carried) != 0 {
			t.Fatalf("%s: stream 1 has a carried table", what)
		}
	}
	var merges int
	for step := range 7 {
		flights(2)
		e.absorbAll()
		res, err := e.s.Step(t.Context(), chainX)
		if err != nil {
			t.Fatal(err)
		}
		merges += res.Merges
		check("run", e.run(cur(1, uint64(2*step))))
	}
	if merges == 0 {
		t.Fatal("no merge in 7 steps")
	}
	check("merged run", e.merged(cur(1, 0)))
}

// TestSettledRefKeepsTheNewestCarriedTable: in refs mode, the absorb's
// refs keep their slots' newest carried table, and the settled ref that
// replaces them keeps the newest of theirs, with its tail (ADR 0062).
func TestSettledRefKeepsTheNewestCarriedTable(t *testing.T) {
	e := newEnv(t, 2, nil)
	for k := range 10 {
		e.star.Carried = map[format.StreamID][]format.PassMark{
			e.ids[0]: {{Producer: format.ProducerID{7}, BatchSeq: uint64(k), FirstSeq: 0, LastSeq: 0}},
		}
		e.flightsWith(1, []int{2, 1})
	}
	e.absorbAll() // passes of 4 slots: three refs per stream
	refs := e.refs(0)
	if len(refs) != 3 || len(refs[0].Carried) != 1 || refs[0].Carried[0].BatchSeq != 3 || refs[0].CarriedBelow != 6 {
		t.Fatalf("refs before settle: %+v", refs)
	}
	if _, err := e.s.Step(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	refs = e.refs(0)
	if len(refs) != 1 || len(refs[0].Carried) != 1 || refs[0].Carried[0].BatchSeq != 9 || refs[0].CarriedBelow != 18 {
		t.Fatalf("settled ref keeps %+v below %d, want batch 9 below 18", refs[0].Carried, refs[0].CarriedBelow)
	}
	if other := e.refs(1); len(other) != 1 || other[0].Carried != nil {
		t.Fatalf("stream 1's settled ref: %+v", other)
	}
	e.check()
}
