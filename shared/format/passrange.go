package format

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Ranged reads of a pass index, run or merged run (design 014, "Lookups
// past the window budget"): a reader that needs one stream's entries and
// cannot afford the whole object reads its pieces by range: the header,
// blocks of the stream table, then the stream's segments and marks (and,
// version 2, the command table). The decoders below check each piece as
// ParsePassIndex checks the whole object, except the whole-object CRC,
// which a ranged read never sees; what is checked instead: the header's
// magic, version, kind, reserved fields and slot range; every count and
// offset against the header's counts, before anything is allocated from
// them; the stream table's id order and segment/mark continuity across
// every block read (so the entries found are where the search put them);
// and the assembled entries against every invariant of checkPassIndex.
// The records themselves carry their segment CRC, checked when read.

// Sizes of a pass index's fixed parts, for ranged reads.
const (
	PassHeaderSize  = passHeaderSize  // the header
	PassEntrySize   = passStreamSize  // one stream table entry
	PassSegmentSize = passSegmentSize // one segment table entry
	PassMarkSize    = passMarkSize    // one mark table entry
)

// PassHeader is the fixed header of a pass index object: its version,
// pass range and table counts, which locate every table.
type PassHeader struct {
	Version   uint16
	Epoch     uint64
	FirstSlot uint64
	EndSlot   uint64
	Streams   uint32 // stream table entries
	Segments  uint32 // segment table entries
	Marks     uint32 // mark table entries
	Digest    uint32 // a run's plan digest (PassIndex.Digest)
}

// ParsePassHeader decodes the header at the start of b (at least
// PassHeaderSize bytes; the rest is not read): magic, version, kind,
// reserved byte, digest and a non-empty slot range.
func ParsePassHeader(b []byte) (PassHeader, error) {
	if len(b) < passHeaderSize {
		return PassHeader{}, fmt.Errorf("pass index header: %d bytes: %w", len(b), ErrTruncated)
	}
	if [4]byte(b[0:4]) != passMagic {
		return PassHeader{}, fmt.Errorf("pass index header: magic %q: %w", b[0:4], ErrMagic)
	}
	h := PassHeader{Version: binary.BigEndian.Uint16(b[4:6])}
	if h.Version < PassIndexVersion || h.Version > PassIndexVersionCarried {
		return PassHeader{}, fmt.Errorf("pass index header: version %d: %w", h.Version, ErrVersion)
	}
	if k := Kind(b[6]); k != KindPassIndex || b[7] != 0 {
		return PassHeader{}, fmt.Errorf("pass index header: kind %d, reserved %d: %w", k, b[7], ErrKind)
	}
	h.Epoch = binary.BigEndian.Uint64(b[8:16])
	h.FirstSlot = binary.BigEndian.Uint64(b[16:24])
	h.EndSlot = binary.BigEndian.Uint64(b[24:32])
	h.Streams = binary.BigEndian.Uint32(b[32:36])
	h.Segments = binary.BigEndian.Uint32(b[36:40])
	h.Marks = binary.BigEndian.Uint32(b[40:44])
	h.Digest = binary.BigEndian.Uint32(b[44:48])
	if h.EndSlot <= h.FirstSlot {
		return PassHeader{}, fmt.Errorf("pass index header: slots %d-%d: %w", h.FirstSlot, h.EndSlot, ErrMalformed)
	}
	return h, nil
}

// EntryAt is the offset of stream table entry i.
func (h PassHeader) EntryAt(i uint32) int64 { return passHeaderSize + int64(i)*passStreamSize }

// SegmentAt is the offset of segment table entry i.
func (h PassHeader) SegmentAt(i uint32) int64 {
	return h.EntryAt(h.Streams) + int64(i)*passSegmentSize
}

// MarkAt is the offset of mark table entry i.
func (h PassHeader) MarkAt(i uint32) int64 { return h.SegmentAt(h.Segments) + int64(i)*passMarkSize }

// CommandsAt is where the tables of fixed-size entries end: the command
// table's offset (versions 2 and 3; the carried table follows it in 3),
// or the CRC's (version 1).
func (h PassHeader) CommandsAt() int64 { return h.MarkAt(h.Marks) }

// FixedSize is the object's size without its command table: a version 1
// object's whole size.
func (h PassHeader) FixedSize() int64 { return h.CommandsAt() + 4 }

// DecodedBytes estimates what the object takes decoded, as
// passindex.DecodedBytes counts it, without its command states: a reader
// decides from it whether the whole object fits its cache.
func (h PassHeader) DecodedBytes(perObject, perStream, perSegment, perMark int64) int64 {
	return perObject + int64(h.Streams)*perStream + int64(h.Segments)*perSegment + int64(h.Marks)*perMark
}

// PassEntry is one decoded stream table entry: the stream's part of the
// pass without its segments, marks and command state, and where its
// segments and marks are in their tables.
type PassEntry struct {
	PassStream // Segments, Marks and Commands nil
	Index      uint32
	SegFirst   uint32
	SegN       uint32
	MarkFirst  uint32
	MarkN      uint32
}

// ParsePassEntries decodes the stream table entries first, first+1, ...
// of the object whose header is h from b (a whole number of entries).
// It checks them as ParsePassIndex does, as far as a block can: inside
// the table; ids in order (a repeated id only a marker then a packed
// entry); each entry's segments and marks inside their tables and
// continuing the previous entry's; the first entry's at 0, the last
// entry's ending at the tables' ends.
func ParsePassEntries(h PassHeader, first uint32, b []byte) ([]PassEntry, error) {
	if len(b)%passStreamSize != 0 {
		return nil, fmt.Errorf("pass index entries at %d: %d bytes, not whole entries: %w", first, len(b), ErrTruncated)
	}
	n := uint64(len(b) / passStreamSize)
	if uint64(first)+n > uint64(h.Streams) {
		return nil, fmt.Errorf("pass index entries %d+%d of %d: %w", first, n, h.Streams, ErrBounds)
	}
	out := make([]PassEntry, n)
	for i := range out {
		q := b[i*passStreamSize:]
		e := PassEntry{Index: first + uint32(i)}
		e.PassStream = decodePassEntry(q, &e.SegFirst, &e.SegN, &e.MarkFirst, &e.MarkN)
		if uint64(e.SegFirst)+uint64(e.SegN) > uint64(h.Segments) || uint64(e.MarkFirst)+uint64(e.MarkN) > uint64(h.Marks) {
			return nil, fmt.Errorf("pass index entry %d: segments %d+%d of %d, marks %d+%d of %d: %w", e.Index, e.SegFirst, e.SegN, h.Segments, e.MarkFirst, e.MarkN, h.Marks, ErrBounds)
		}
		switch {
		case i > 0:
			prev := &out[i-1]
			if e.SegFirst != prev.SegFirst+prev.SegN || e.MarkFirst != prev.MarkFirst+prev.MarkN {
				return nil, fmt.Errorf("pass index entry %d: segments at %d, marks at %d do not continue entry %d's: %w", e.Index, e.SegFirst, e.MarkFirst, prev.Index, ErrBounds)
			}
			switch c := bytes.Compare(prev.Stream[:], e.Stream[:]); {
			case c > 0:
				return nil, fmt.Errorf("pass index entry %d (%s) not after entry %d: %w", e.Index, e.Stream, prev.Index, ErrMalformed)
			case c == 0 && !(prev.SegN == 0 && e.SegN > 0):
				return nil, fmt.Errorf("pass index entry %d (%s) twice: only a marker then a packed entry: %w", e.Index, e.Stream, ErrMalformed)
			}
		case e.Index == 0:
			if e.SegFirst != 0 || e.MarkFirst != 0 {
				return nil, fmt.Errorf("pass index entry 0: segments at %d, marks at %d: %w", e.SegFirst, e.MarkFirst, ErrBounds)
			}
		}
		out[i] = e
	}
	if n > 0 && uint64(first)+n == uint64(h.Streams) {
		last := &out[n-1]
		if last.SegFirst+last.SegN != h.Segments || last.MarkFirst+last.MarkN != h.Marks {
			return nil, fmt.Errorf("pass index: streams hold %d of %d segments, %d of %d marks: %w", last.SegFirst+last.SegN, h.Segments, last.MarkFirst+last.MarkN, h.Marks, ErrBounds)
		}
	}
	return out, nil
}

// ParsePassSegments decodes segment table entries from b (a whole number
// of them).
func ParsePassSegments(b []byte) ([]PassSegment, error) {
	if len(b)%passSegmentSize != 0 {
		return nil, fmt.Errorf("pass index segments: %d bytes, not whole entries: %w", len(b), ErrTruncated)
	}
	out := make([]PassSegment, len(b)/passSegmentSize)
	for i := range out {
		out[i] = decodePassSegment(b[i*passSegmentSize:])
	}
	return out, nil
}

// ParsePassMarks decodes mark table entries from b (a whole number of
// them).
func ParsePassMarks(b []byte) ([]PassMark, error) {
	if len(b)%passMarkSize != 0 {
		return nil, fmt.Errorf("pass index marks: %d bytes, not whole entries: %w", len(b), ErrTruncated)
	}
	out := make([]PassMark, len(b)/passMarkSize)
	for i := range out {
		out[i] = decodePassMark(b[i*passMarkSize:])
	}
	return out, nil
}

// ParsePassCommandTail decodes the tail of a version 2 object whose
// header is h, from its command table's offset (CommandsAt) to its end:
// the command table, then the CRC (not checked: it covers the whole
// object). Entries are checked as ParsePassIndex checks them: at least
// one, stream indexes increasing and inside the stream table.
//
// A version 3 object's tail is ParsePassTail's; this returns its command
// table alone.
func ParsePassCommandTail(h PassHeader, tail []byte) ([]CommandEntry, error) {
	cmds, _, err := ParsePassTail(h, tail)
	return cmds, err
}

// ParsePassTail is ParsePassCommandTail that also decodes a version 3
// object's carried table (after its command table, which may be empty).
// The carried marks' seqs are checked against their streams' seqs when
// assembled (AssemblePassStreamsCarried), not here: the tail does not hold
// the stream table.
func ParsePassTail(h PassHeader, tail []byte) ([]CommandEntry, []CarriedEntry, error) {
	if h.Version != PassIndexVersionCommands && h.Version != PassIndexVersionCarried {
		return nil, nil, fmt.Errorf("pass index version %d has no command table: %w", h.Version, ErrVersion)
	}
	if len(tail) < 4 {
		return nil, nil, fmt.Errorf("pass index command tail: %d bytes: %w", len(tail), ErrTruncated)
	}
	cmds, carried, err := parseCommandTail(h.Version, tail[:len(tail)-4], int(h.Streams), func(uint32) uint64 { return ^uint64(0) })
	if err != nil {
		return nil, nil, fmt.Errorf("pass index: %w", err)
	}
	return cmds, carried, nil
}

// AssemblePassStreams joins consecutive entries (ParsePassEntries: one
// stream's, a marker then a packed entry at most) with their segments
// (the segment table from ents[0].SegFirst, as many as the entries name),
// marks (likewise) and, version 2, the command table's entries (cmds:
// ParsePassCommandTail; those of other streams are ignored), and checks
// the result as ParsePassIndex checks a whole object's streams.
func AssemblePassStreams(h PassHeader, ents []PassEntry, segs []PassSegment, marks []PassMark, cmds []CommandEntry) ([]PassStream, error) {
	return AssemblePassStreamsCarried(h, ents, segs, marks, cmds, nil)
}

// AssemblePassStreamsCarried is AssemblePassStreams with a version 3
// object's carried table (ParsePassTail; those of other streams are
// ignored).
func AssemblePassStreamsCarried(h PassHeader, ents []PassEntry, segs []PassSegment, marks []PassMark, cmds []CommandEntry, carried []CarriedEntry) ([]PassStream, error) {
	var nSeg, nMark uint64
	for i, e := range ents {
		if i > 0 && (e.Index != ents[i-1].Index+1 || e.SegFirst != ents[i-1].SegFirst+ents[i-1].SegN || e.MarkFirst != ents[i-1].MarkFirst+ents[i-1].MarkN) {
			return nil, fmt.Errorf("pass index entry %d does not follow entry %d: %w", e.Index, ents[i-1].Index, ErrBounds)
		}
		nSeg += uint64(e.SegN)
		nMark += uint64(e.MarkN)
	}
	if uint64(len(segs)) != nSeg || uint64(len(marks)) != nMark {
		return nil, fmt.Errorf("pass index entries name %d segments and %d marks, have %d and %d: %w", nSeg, nMark, len(segs), len(marks), ErrBounds)
	}
	if (len(cmds) > 0 && h.Version < PassIndexVersionCommands) || (len(carried) > 0 && h.Version != PassIndexVersionCarried) {
		return nil, fmt.Errorf("pass index version %d with command state or a carried table: %w", h.Version, ErrMalformed)
	}
	p := PassIndex{Epoch: h.Epoch, FirstSlot: h.FirstSlot, EndSlot: h.EndSlot, Streams: make([]PassStream, len(ents))}
	var seg, mark uint32
	for i, e := range ents {
		s := e.PassStream
		s.Segments = segs[seg : seg+e.SegN : seg+e.SegN]
		if e.MarkN > 0 {
			s.Marks = marks[mark : mark+e.MarkN : mark+e.MarkN]
		}
		seg, mark = seg+e.SegN, mark+e.MarkN
		for _, c := range cmds {
			if c.Entry == e.Index {
				cs := c.Commands
				s.Commands = &cs
			}
		}
		for _, c := range carried {
			if c.Entry == e.Index {
				s.Carried, s.CarriedBelow = c.Marks, c.Below
			}
		}
		p.Streams[i] = s
	}
	if err := checkPassIndex(&p); err != nil {
		return nil, err
	}
	return p.Streams, nil
}

func decodePassEntry(q []byte, segFirst, segN, markFirst, markN *uint32) PassStream {
	s := PassStream{
		FirstSeq:  binary.BigEndian.Uint64(q[16:24]),
		LastSeq:   binary.BigEndian.Uint64(q[24:32]),
		FirstTsMs: int64(binary.BigEndian.Uint64(q[32:40])),
		LastTsMs:  int64(binary.BigEndian.Uint64(q[40:48])),
		Bytes:     int64(binary.BigEndian.Uint64(q[48:56])),
	}
	copy(s.Stream[:], q[0:16])
	*segFirst, *segN = binary.BigEndian.Uint32(q[56:60]), binary.BigEndian.Uint32(q[60:64])
	*markFirst, *markN = binary.BigEndian.Uint32(q[64:68]), binary.BigEndian.Uint32(q[68:72])
	return s
}

func decodePassSegment(q []byte) PassSegment {
	return PassSegment{
		Slot:     binary.BigEndian.Uint64(q[0:8]),
		FirstSeq: binary.BigEndian.Uint64(q[8:16]),
		Count:    binary.BigEndian.Uint32(q[16:20]),
		Offset:   binary.BigEndian.Uint32(q[20:24]),
		Length:   binary.BigEndian.Uint32(q[24:28]),
		CRC:      binary.BigEndian.Uint32(q[28:32]),
	}
}

func decodePassMark(q []byte) PassMark {
	var m PassMark
	copy(m.Producer[:], q[0:16])
	m.BatchSeq = binary.BigEndian.Uint64(q[16:24])
	m.FirstSeq = binary.BigEndian.Uint64(q[24:32])
	m.LastSeq = binary.BigEndian.Uint64(q[32:40])
	return m
}
