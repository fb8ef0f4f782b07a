package absorb

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
)

// TestPassIndexMatchesRefs: for a pass BuildRefs does not split, each
// stream's part of the pass index, as a ref (PassRef), is exactly the ref
// BuildRefs builds: same seqs, timestamps, bytes, locations and producer
// marks and command state (the latest of the stream's segments: stream a
// fenced in slot 8 then trimmed in slot 11, stream c with a configuration).
// The two index forms are independent code over the same slots.
func TestPassIndexMatchesRefs(t *testing.T) {
	var a, b, c format.StreamID
	a[0], b[0], c[0] = 0xb, 0xa, 0xc // not in id order in the slots
	p, q := format.ProducerID{1}, format.ProducerID{2}
	var slots []chain.Slot
	for i := range 10 {
		seq := uint64(i * 2)
		s := chain.Slot{Seq: uint64(5 + i), Key: format.SlotKey("s", 1, uint64(5+i)),
			Entries: []format.FooterEntry{
				{Stream: a, FirstSeq: seq, Count: 2, Offset: 60, Length: 100, FirstTsMs: int64(i), LastTsMs: int64(i + 1)},
				{Stream: b, FirstSeq: uint64(i), Count: 1, Offset: 160, Length: 50, FirstTsMs: 7, LastTsMs: 7},
			},
			Batches: []format.BatchEntry{
				{Entry: 0, Producer: p, BatchSeq: uint64(100 + i), FirstSeq: seq, Count: 1},
				{Entry: 1, Producer: q, BatchSeq: uint64(i), FirstSeq: uint64(i), Count: 1},
			}}
		if i == 4 {
			s.Entries = append(s.Entries, format.FooterEntry{Stream: c, FirstSeq: 40, Count: 3, Offset: 210, Length: 80, FirstTsMs: 9, LastTsMs: 11})
			s.Commands = []format.CommandEntry{{Entry: 2, Commands: format.StreamCommands{HasConfig: true, Config: format.StreamConfig{RetentionMs: 1000}}}}
		}
		if i == 3 || i == 6 {
			s.Commands = []format.CommandEntry{{Entry: 0, Commands: format.StreamCommands{FenceToken: "w", TrimSeq: uint64(i)}}}
		}
		if i == 2 || i == 7 { // stream a carries its dedupe table (ADR 0062): the newest is kept
			s.Carried = []format.CarriedEntry{{Entry: 0, Below: seq, Marks: []format.PassMark{{Producer: q, BatchSeq: 50, FirstSeq: 0, LastSeq: 0}, {Producer: p, BatchSeq: uint64(i), FirstSeq: seq - 1, LastSeq: seq - 1}}}}
		}
		slots = append(slots, s)
	}
	refs, err := BuildRefs(slots)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := BuildPassIndex(1, 5, 15, slots)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Streams) != 3 || len(refs) != 3 {
		t.Fatalf("%d index streams, %d refs", len(idx.Streams), len(refs))
	}
	if c := idx.Streams[1].Carried; len(c) != 2 || c[1].BatchSeq != 7 || idx.Streams[0].Carried != nil || len(refs[1].Carried) != 2 || refs[1].Carried[1].BatchSeq != 7 || refs[1].CarriedBelow != 14 || idx.Streams[1].CarriedBelow != 14 {
		t.Fatalf("carried: stream a %+v (ref %+v), stream b %+v", c, refs[1].Carried, idx.Streams[0].Carried)
	}
	if c := idx.Streams[1].Commands; c == nil || *c != (format.StreamCommands{FenceToken: "w", TrimSeq: 6}) || idx.Streams[0].Commands != nil {
		t.Fatalf("command state: stream a %+v, stream b %+v", c, idx.Streams[0].Commands)
	}
	for i := range idx.Streams {
		got := passindex.PassRef("s", 1, &idx.Streams[i])
		if !metastore.EqualRef(got, refs[i]) {
			t.Fatalf("stream %d:\nindex %+v\nref   %+v", i, got, refs[i])
		}
	}
	// It encodes (the format's own checks pass) and decodes to the same.
	obj, err := format.AppendPassIndex(nil, idx)
	if err != nil {
		t.Fatal(err)
	}
	back, err := format.ParsePassIndex(obj)
	if err != nil || len(back.Streams) != 3 || !metastore.EqualRef(passindex.PassRef("s", 1, &back.Streams[2]), refs[2]) || !metastore.EqualRef(passindex.PassRef("s", 1, &back.Streams[1]), refs[1]) {
		t.Fatalf("round trip: %v", err)
	}
	// A gap is loud, as in BuildRefs.
	slots[3].Entries[0].FirstSeq++
	if _, err := BuildPassIndex(1, 5, 15, slots); !errors.Is(err, ErrGap) {
		t.Fatalf("gap: %v", err)
	}
}
