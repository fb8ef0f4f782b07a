package absorb

import (
	"testing"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// TestBuildRefsKeepsProducerMarks: the batch tables of a pass's slots end
// up as producer marks on their streams' refs, in seq order, each
// producer's latest MaxMarksPerProducer kept.
func TestBuildRefsKeepsProducerMarks(t *testing.T) {
	var a, b format.StreamID
	a[0], b[0] = 0xa, 0xb
	p := format.ProducerID{1}
	q := format.ProducerID{2}
	var slots []chain.Slot
	for i := range 10 {
		seq := uint64(i * 2)
		slots = append(slots, chain.Slot{Seq: uint64(i), Key: format.SlotKey("s", 1, uint64(i)),
			Entries: []format.FooterEntry{
				{Stream: a, FirstSeq: seq, Count: 2, Offset: 60, Length: 100},
				{Stream: b, FirstSeq: uint64(i), Count: 1, Offset: 160, Length: 50},
			},
			Batches: []format.BatchEntry{
				{Entry: 0, Producer: p, BatchSeq: uint64(100 + i), FirstSeq: seq, Count: 1}, // the second record has no producer
				{Entry: 1, Producer: q, BatchSeq: uint64(i), FirstSeq: uint64(i), Count: 1},
			}})
	}
	refs, err := BuildRefs(slots)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 {
		t.Fatalf("%d refs", len(refs))
	}
	for _, r := range refs {
		if err := metastore.ValidateRef(r); err != nil {
			t.Fatal(err)
		}
		if len(r.Producers) != metastore.MaxMarksPerProducer {
			t.Fatalf("ref %s keeps %d marks", r.StreamID, len(r.Producers))
		}
		lastMark := r.Producers[len(r.Producers)-1]
		switch r.StreamID {
		case a.String():
			if lastMark.Producer != p || lastMark.BatchSeq != 109 || lastMark.FirstSeq != 18 || lastMark.LastSeq != 18 || r.Producers[0].BatchSeq != 102 {
				t.Fatalf("stream a marks %+v", r.Producers)
			}
		case b.String():
			if lastMark.Producer != q || lastMark.BatchSeq != 9 || lastMark.FirstSeq != 9 {
				t.Fatalf("stream b marks %+v", r.Producers)
			}
		}
	}
}

// TestBuildRefsKeepsCommandState: a ref keeps the command state of its last
// segment (the stream's state as of the ref's last record), so the latest
// ref of a stream carries its fencing token and trim point; a stream
// without command state has none.
func TestBuildRefsKeepsCommandState(t *testing.T) {
	var a, b format.StreamID
	a[0], b[0] = 0xa, 0xb
	var slots []chain.Slot
	for i := range 3 {
		s := chain.Slot{Seq: uint64(i), Key: format.SlotKey("s", 1, uint64(i)),
			Entries: []format.FooterEntry{
				{Stream: a, FirstSeq: uint64(i), Count: 1, Offset: 60, Length: 100},
				{Stream: b, FirstSeq: uint64(i), Count: 1, Offset: 160, Length: 50},
			}}
		if i > 0 { // stream a fenced in slot 1, trimmed in slot 2
			s.Commands = []format.CommandEntry{{Entry: 0, Commands: format.StreamCommands{FenceToken: "w", TrimSeq: uint64(i - 1)}}}
		}
		slots = append(slots, s)
	}
	refs, err := BuildRefs(slots)
	if err != nil || len(refs) != 2 {
		t.Fatal(refs, err)
	}
	for _, r := range refs {
		if err := metastore.ValidateRef(r); err != nil {
			t.Fatal(err)
		}
		switch r.StreamID {
		case a.String():
			if r.Commands == nil || *r.Commands != (format.StreamCommands{FenceToken: "w", TrimSeq: 1}) {
				t.Fatalf("stream a's ref keeps %+v", r.Commands)
			}
		case b.String():
			if r.Commands != nil {
				t.Fatalf("stream b's ref has command state %+v", r.Commands)
			}
		}
	}
}
