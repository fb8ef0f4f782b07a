package settle

import (
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

func TestMergeMarksCarriesTheLatest(t *testing.T) {
	p := [16]byte{1}
	var old []metastore.Ref
	for k := range 12 {
		old = append(old, metastore.Ref{FirstSeq: uint64(k * 10), LastSeq: uint64(k*10 + 9),
			Producers: []metastore.ProducerMark{{Producer: p, BatchSeq: uint64(k), FirstSeq: uint64(k * 10), LastSeq: uint64(k * 10)}}})
	}
	old = append(old, metastore.Ref{FirstSeq: 120, LastSeq: 129}) // no marks
	got := mergeMarks(old)
	if len(got) != metastore.MaxMarksPerProducer || got[0].BatchSeq != 4 || got[len(got)-1].BatchSeq != 11 {
		t.Fatalf("merged %+v", got)
	}
	if mergeMarks(old[12:]) != nil {
		t.Fatal("marks from refs without any")
	}
}

func TestLastCommandsCarriesTheLatest(t *testing.T) {
	old := []metastore.Ref{
		{FirstSeq: 0, LastSeq: 9, Commands: &format.StreamCommands{FenceToken: "a"}},
		{FirstSeq: 10, LastSeq: 19, Commands: &format.StreamCommands{FenceToken: "b", TrimSeq: 3}},
		{FirstSeq: 20, LastSeq: 29}, // a ref written before the stream's state reached refs
	}
	if got := lastCommands(old); got == nil || *got != (format.StreamCommands{FenceToken: "b", TrimSeq: 3}) || got == old[1].Commands {
		t.Fatalf("got %+v", got)
	}
	if lastCommands(old[2:]) != nil {
		t.Fatal("command state from refs without any")
	}
}

// A merge keeps the newest carried table of the parts it merges (ADR
// 0062), refs and pass streams alike, as a copy.
func TestLastCarriedKeepsTheNewest(t *testing.T) {
	m := func(b byte, seq uint64) metastore.ProducerMark {
		return metastore.ProducerMark{Producer: [16]byte{b}, BatchSeq: seq, FirstSeq: seq, LastSeq: seq}
	}
	old := []metastore.Ref{
		{FirstSeq: 10, LastSeq: 19, Carried: []metastore.ProducerMark{m(1, 2)}, CarriedBelow: 10},
		{FirstSeq: 20, LastSeq: 29, Carried: []metastore.ProducerMark{m(1, 2), m(2, 15)}, CarriedBelow: 18},
		{FirstSeq: 30, LastSeq: 39}, // a part without one
	}
	got, below := lastCarried(old)
	if len(got) != 2 || got[1] != m(2, 15) || &got[0] == &old[1].Carried[0] || below != 18 {
		t.Fatalf("got %+v below %d", got, below)
	}
	if got, below := lastCarried(old[2:]); got != nil || below != 0 {
		t.Fatal("a carried table from parts without any")
	}
	parts := []*format.PassStream{{Carried: metastore.PassMarks(old[0].Carried), CarriedBelow: 10}, {Carried: metastore.PassMarks(old[1].Carried), CarriedBelow: 18}, {}}
	if pc, below := lastPassCarried(parts); len(pc) != 2 || pc[1].BatchSeq != 15 || below != 18 {
		t.Fatalf("pass parts: %+v", pc)
	}
}
