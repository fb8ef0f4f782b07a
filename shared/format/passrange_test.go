package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// randomPassIndex is a valid pass index of n streams: ids uniform
// (skew 0), sharing their first 8 bytes (1: interpolation has nothing to
// go on) or small integers in the first 8 bytes (2: clustered at the low
// end of the id space); with merged, a third of the streams a marker then
// a packed entry (a merged run's pairs); with commands, a fifth of the
// packed entries with command state (version 2).
func randomPassIndex(rng *rand.Rand, n, skew int, merged, commands bool) PassIndex {
	p := PassIndex{Epoch: 2, FirstSlot: 10, EndSlot: 20}
	seen := map[StreamID]bool{}
	var ids []StreamID
	for len(ids) < n {
		var id StreamID
		switch skew {
		case 0:
			binary.BigEndian.PutUint64(id[:8], rng.Uint64())
			binary.BigEndian.PutUint64(id[8:], rng.Uint64())
		case 1:
			copy(id[:8], "prefix!!")
			binary.BigEndian.PutUint64(id[8:], rng.Uint64N(uint64(4*n+1)))
		default:
			binary.BigEndian.PutUint64(id[:8], rng.Uint64N(uint64(4*n+1)))
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b StreamID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		seq := rng.Uint64N(1000)
		if merged && rng.IntN(3) == 0 {
			p.Streams = append(p.Streams, PassStream{Stream: id, FirstSeq: seq, LastSeq: seq + 4, FirstTsMs: 5, LastTsMs: 6})
			seq += 5
		}
		s := PassStream{Stream: id, FirstSeq: seq, FirstTsMs: 10, LastTsMs: 10 + rng.Int64N(5), Bytes: rng.Int64N(1000)}
		slot := p.FirstSlot
		for range 1 + rng.IntN(3) {
			slot += rng.Uint64N(3)
			slot = min(slot, p.EndSlot-1)
			count := 1 + rng.Uint32N(5)
			s.Segments = append(s.Segments, PassSegment{Slot: slot, FirstSeq: seq, Count: count, Offset: rng.Uint32(), Length: rng.Uint32(), CRC: rng.Uint32()})
			seq += uint64(count)
		}
		s.LastSeq = seq - 1
		for m := s.FirstSeq; m <= s.LastSeq && rng.IntN(2) == 0; m += 2 {
			s.Marks = append(s.Marks, PassMark{Producer: ProducerID{1, byte(m)}, BatchSeq: m, FirstSeq: m, LastSeq: m})
		}
		if commands && rng.IntN(5) == 0 {
			s.Commands = &StreamCommands{FenceToken: "token", TrimSeq: rng.Uint64N(10)}
		}
		p.Streams = append(p.Streams, s)
	}
	return p
}

// piecesFind finds id's entries in obj from its pieces alone, as a
// ranged reader would: the header, the stream table in blocks of `block`
// entries (each decoded on its own), then the found entries' segments,
// marks and command table.
func piecesFind(obj []byte, id StreamID, block int) ([]PassStream, error) {
	h, err := ParsePassHeader(obj)
	if err != nil {
		return nil, err
	}
	piece := func(off, n int64) ([]byte, error) {
		if off < 0 || n < 0 || off+n > int64(len(obj)) {
			return nil, ErrTruncated
		}
		return obj[off : off+n], nil
	}
	var ents []PassEntry
	for first := uint32(0); first < h.Streams; first += uint32(block) {
		n := min(uint32(block), h.Streams-first)
		b, err := piece(h.EntryAt(first), int64(n)*PassEntrySize)
		if err != nil {
			return nil, err
		}
		es, err := ParsePassEntries(h, first, b)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if e.Stream == id {
				ents = append(ents, e)
			}
		}
	}
	if len(ents) == 0 {
		return nil, nil
	}
	var nSeg, nMark uint32
	for _, e := range ents {
		nSeg += e.SegN
		nMark += e.MarkN
	}
	b, err := piece(h.SegmentAt(ents[0].SegFirst), int64(nSeg)*PassSegmentSize)
	if err != nil {
		return nil, err
	}
	segs, err := ParsePassSegments(b)
	if err != nil {
		return nil, err
	}
	if b, err = piece(h.MarkAt(ents[0].MarkFirst), int64(nMark)*PassMarkSize); err != nil {
		return nil, err
	}
	marks, err := ParsePassMarks(b)
	if err != nil {
		return nil, err
	}
	var cmds []CommandEntry
	var carried []CarriedEntry
	if h.Version >= PassIndexVersionCommands {
		if h.CommandsAt() > int64(len(obj)) {
			return nil, ErrTruncated
		}
		if cmds, carried, err = ParsePassTail(h, obj[h.CommandsAt():]); err != nil {
			return nil, err
		}
	}
	return AssemblePassStreamsCarried(h, ents, segs, marks, cmds, carried)
}

// TestPassRangedPiecesEqualFindAll: a stream's entries decoded from the
// pieces (header, stream table blocks, its segments, marks and command
// table) equal what FindAll finds in the whole object, for objects of 0,
// 1 and many streams, uniform and skewed ids, merged runs' marker and
// packed pairs, versions 1 and 2, blocks that split a pair.
func TestPassRangedPiecesEqualFindAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 7, 300} {
		for skew := range 3 {
			for _, merged := range []bool{false, true} {
				for _, commands := range []bool{false, true} {
					p := randomPassIndex(rng, n, skew, merged, commands)
					obj, err := AppendPassIndex(nil, p)
					if err != nil {
						t.Fatal(err)
					}
					whole, err := ParsePassIndex(obj)
					if err != nil {
						t.Fatal(err)
					}
					var absent StreamID
					absent[0] = 0xff
					ids := []StreamID{absent, {}}
					for _, s := range p.Streams {
						ids = append(ids, s.Stream)
					}
					for _, block := range []int{1, 2, 3, 64} {
						for _, id := range ids {
							got, err := piecesFind(obj, id, block)
							if err != nil {
								t.Fatalf("n=%d skew=%d merged=%v commands=%v block=%d id %s: %v", n, skew, merged, commands, block, id, err)
							}
							if want := whole.FindAll(id); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
								t.Fatalf("n=%d skew=%d merged=%v commands=%v block=%d id %s: pieces %+v, whole %+v", n, skew, merged, commands, block, id, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestPassRangedPiecesRefuseCorruption: every piece's decoder refuses a
// corrupt piece with the format's sentinel errors (a ranged read has no
// whole-object CRC to catch it).
func TestPassRangedPiecesRefuseCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := randomPassIndex(rng, 5, 0, true, true)
	obj, err := AppendPassIndex(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParsePassHeader(obj)
	if err != nil || h.Version != PassIndexVersionCommands || h.Streams != uint32(len(p.Streams)) {
		t.Fatalf("header %+v, %v", h, err)
	}
	if h.FixedSize() > int64(len(obj)) || h.CommandsAt() >= int64(len(obj))-4 {
		t.Fatalf("header %+v locates tables past the %d-byte object", h, len(obj))
	}
	table := obj[h.EntryAt(0):h.EntryAt(h.Streams)]
	mutate := func(b []byte, at int, v byte) []byte { b = bytes.Clone(b); b[at] = v; return b }
	put32 := func(b []byte, at int, v uint32) []byte {
		b = bytes.Clone(b)
		binary.BigEndian.PutUint32(b[at:], v)
		return b
	}
	for _, tc := range []struct {
		name string
		err  error
		run  func() error
	}{
		{"header short", ErrTruncated, func() error { _, err := ParsePassHeader(obj[:47]); return err }},
		{"header magic", ErrMagic, func() error { _, err := ParsePassHeader(mutate(obj, 0, 'X')); return err }},
		{"header version", ErrVersion, func() error { _, err := ParsePassHeader(mutate(obj, 5, 9)); return err }},
		{"header kind", ErrKind, func() error { _, err := ParsePassHeader(mutate(obj, 6, 0)); return err }},
		{"header reserved", ErrKind, func() error { _, err := ParsePassHeader(mutate(obj, 7, 1)); return err }},
		{"header slots", ErrMalformed, func() error { _, err := ParsePassHeader(put32(obj, 28, 0)); return err }},
		{"entries partial", ErrTruncated, func() error { _, err := ParsePassEntries(h, 0, table[:100]); return err }},
		{"entries past the table", ErrBounds, func() error { _, err := ParsePassEntries(h, 1, table); return err }},
		{"entries out of order", ErrMalformed, func() error {
			b := bytes.Clone(table)
			copy(b[4*PassEntrySize:], bytes.Repeat([]byte{0}, 16)) // the last id below the others
			_, err := ParsePassEntries(h, 0, b)
			return err
		}},
		{"entry segments past the table", ErrBounds, func() error { _, err := ParsePassEntries(h, 0, put32(table, 60, h.Segments+1)); return err }},
		{"entries not continuing", ErrBounds, func() error {
			_, err := ParsePassEntries(h, 1, put32(table[PassEntrySize:], PassEntrySize+56, 0))
			return err
		}},
		{"first entry not at 0", ErrBounds, func() error { _, err := ParsePassEntries(h, 0, put32(table[:PassEntrySize], 56, 1)); return err }},
		{"segments partial", ErrTruncated, func() error { _, err := ParsePassSegments(make([]byte, 33)); return err }},
		{"marks partial", ErrTruncated, func() error { _, err := ParsePassMarks(make([]byte, 41)); return err }},
		{"command tail on version 1", ErrVersion, func() error {
			v1 := h
			v1.Version = PassIndexVersion
			_, err := ParsePassCommandTail(v1, obj[h.CommandsAt():])
			return err
		}},
		{"command tail short", ErrTruncated, func() error { _, err := ParsePassCommandTail(h, obj[len(obj)-3:]); return err }},
		{"command tail cut", ErrTruncated, func() error {
			tail := obj[h.CommandsAt():]
			_, err := ParsePassCommandTail(h, append(bytes.Clone(tail[:len(tail)-9]), 0, 0, 0, 0))
			return err
		}},
		{"command entry past the streams", ErrMalformed, func() error {
			_, err := ParsePassCommandTail(h, put32(obj[h.CommandsAt():], 4, h.Streams))
			return err
		}},
		{"assembled segments missing", ErrBounds, func() error {
			ents, err := ParsePassEntries(h, 0, table[:PassEntrySize])
			if err != nil {
				return err
			}
			_, err = AssemblePassStreams(h, ents, nil, nil, nil)
			return err
		}},
		{"assembled segment seqs", ErrMalformed, func() error {
			ents, err := ParsePassEntries(h, 0, table)
			if err != nil {
				return err
			}
			e := ents[len(ents)-1:]
			segs := make([]PassSegment, e[0].SegN)
			marks := make([]PassMark, e[0].MarkN)
			_, err = AssemblePassStreams(h, e, segs, marks, nil)
			return err
		}},
		{"assembled entries apart", ErrBounds, func() error {
			ents, err := ParsePassEntries(h, 0, table)
			if err != nil {
				return err
			}
			_, err = AssemblePassStreams(h, []PassEntry{ents[0], ents[2]}, nil, nil, nil)
			return err
		}},
	} {
		if err := tc.run(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}

// passRangedSeeds are the fuzz seeds of the piece decoders: the golden
// vectors, random objects of every shape, a flight.
func passRangedSeeds(f *testing.F) {
	f.Add(goldenPassIndexBytes())
	if v2, err := AppendPassIndex(nil, goldenPassIndexV2()); err == nil {
		f.Add(v2)
	}
	if v3, err := AppendPassIndex(nil, goldenPassIndexV3()); err == nil {
		f.Add(v3)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 4} {
		if obj, err := AppendPassIndex(nil, randomPassIndex(rng, n, n%3, true, true)); err == nil {
			f.Add(obj)
		}
	}
	f.Add(goldenFlight())
}

// FuzzPassRangedPieces: on any bytes, the pieces' decoders never panic;
// on an object ParsePassIndex accepts, they find what FindAll finds.
func FuzzPassRangedPieces(f *testing.F) {
	passRangedSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		whole, werr := ParsePassIndex(b)
		ids := []StreamID{{}}
		if werr == nil {
			for _, s := range whole.Streams {
				ids = append(ids, s.Stream)
			}
		}
		for _, id := range ids {
			got, err := piecesFind(b, id, 2)
			if werr != nil {
				continue
			}
			if err != nil {
				t.Fatalf("id %s: pieces %v, whole object parses", id, err)
			}
			if want := whole.FindAll(id); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("id %s: pieces %+v, whole %+v", id, got, want)
			}
		}
	})
}

// FuzzParsePassHeader: any bytes decode to a header or an error; a
// header locates its tables in order.
func FuzzParsePassHeader(f *testing.F) {
	passRangedSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParsePassHeader(b)
		if err != nil {
			return
		}
		if !(h.EntryAt(0) <= h.SegmentAt(0) && h.SegmentAt(0) <= h.MarkAt(0) && h.MarkAt(0) <= h.CommandsAt() && h.EndSlot > h.FirstSlot) {
			t.Fatalf("header %+v: tables out of order", h)
		}
	})
}

// FuzzParsePassEntries: any block, under any header's counts, decodes to
// entries inside the tables or to an error, never more entries than the
// block holds.
func FuzzParsePassEntries(f *testing.F) {
	passRangedSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParsePassHeader(b)
		if err != nil {
			h = PassHeader{Streams: 1 << 20, Segments: 1 << 20, Marks: 1 << 20}
		}
		for _, first := range []uint32{0, 1, h.Streams / 2} {
			rest := b[min(len(b), passHeaderSize):]
			rest = rest[:len(rest)/passStreamSize*passStreamSize]
			ents, err := ParsePassEntries(h, first, rest)
			if err != nil {
				continue
			}
			if len(ents)*passStreamSize != len(rest) {
				t.Fatalf("%d entries from %d bytes", len(ents), len(rest))
			}
			for _, e := range ents {
				if uint64(e.SegFirst)+uint64(e.SegN) > uint64(h.Segments) || uint64(e.MarkFirst)+uint64(e.MarkN) > uint64(h.Marks) || e.Index >= h.Streams {
					t.Fatalf("entry %+v outside header %+v", e, h)
				}
			}
		}
	})
}

// FuzzParsePassSegmentsMarks: segment and mark tables decode to exactly
// as many entries as their bytes hold, or to an error.
func FuzzParsePassSegmentsMarks(f *testing.F) {
	passRangedSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if segs, err := ParsePassSegments(b); err == nil && len(segs)*passSegmentSize != len(b) {
			t.Fatalf("%d segments from %d bytes", len(segs), len(b))
		}
		if marks, err := ParsePassMarks(b); err == nil && len(marks)*passMarkSize != len(b) {
			t.Fatalf("%d marks from %d bytes", len(marks), len(b))
		}
	})
}

// FuzzParsePassCommandTail: any tail, under any header, decodes to
// command entries of streams inside the table, or to an error.
func FuzzParsePassCommandTail(f *testing.F) {
	passRangedSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParsePassHeader(b)
		tail := b
		if err == nil && h.CommandsAt() <= int64(len(b)) {
			tail = b[h.CommandsAt():]
		} else {
			h = PassHeader{Version: PassIndexVersionCommands, Streams: 16}
		}
		if h.Version != PassIndexVersionCarried {
			h.Version = PassIndexVersionCommands
		}
		cmds, carried, err := ParsePassTail(h, tail)
		if err != nil {
			return
		}
		for i, c := range cmds {
			if c.Entry >= h.Streams || (i > 0 && c.Entry <= cmds[i-1].Entry) {
				t.Fatalf("command entry %d: stream %d of %d", i, c.Entry, h.Streams)
			}
		}
		for i, c := range carried {
			if c.Entry >= h.Streams || (i > 0 && c.Entry <= carried[i-1].Entry) || CheckCarried(c.Marks, c.Below) != nil {
				t.Fatalf("carried entry %d: stream %d of %d, marks %+v below %d", i, c.Entry, h.Streams, c.Marks, c.Below)
			}
		}
	})
}
