package format

import (
	"encoding/binary"
	"fmt"
)

// The carried table (ADR 0062): a star writes a stream's dedupe table of
// acknowledged batches (each producer's latest marks) into one of the
// stream's flights, apart from the flight's own batch table, so that a
// successor finds every producer the star knew in the stream's last parts,
// however long ago its batch was committed. A carried mark names a batch
// released (acknowledged) before the flight was cut: its seqs lie below
// the carrying segment's first seq. A version-4 flight (VersionCarried) has
// it after the command table; a version-3 pass index
// (PassIndexVersionCarried) after its command table, per stream.
//
//	0  4  count of entries (at least 1)
//	   per entry:
//	   0  4  footer entry (flight) or stream table index (pass index),
//	         strictly increasing
//	   4  4  n, the marks (1 to MaxCarriedMarks)
//	   8  8  below: the stream's acknowledged tail when the table was
//	         taken (at most the segment's first seq; in a pass index, at
//	         most one past the stream's last seq): every batch the star
//	         had acknowledged below it and remembered is in the table,
//	         within its bounds, and every batch at or above it is in a
//	         flight's batch table from there on
//	  16  n × 40: producer id 16, batch seq 8, first seq 8, last seq 8;
//	         in seq order, not overlapping, below `below`, at most
//	         MaxCarriedPerProducer of one producer
//
// The bounds are metastore's (MaxRefProducerMarks, MaxMarksPerProducer):
// frozen, part of flight version 4 and pass index version 3.
const (
	MaxCarriedMarks       = 1024
	MaxCarriedPerProducer = 8
	carriedMarkSize       = 40
	carriedEntryFixed     = 4 + 4 + 8
)

// CarriedEntry is one stream's carried table: the marks of the batches the
// star had acknowledged when it cut the flight (the segment at footer entry
// Entry), or, in a pass index, the newest such table of the stream's part
// (Entry is then its stream table index).
type CarriedEntry struct {
	Entry uint32
	Below uint64 // the acknowledged tail when the table was taken
	Marks []PassMark
}

// SetCarried records the open segment's stream's carried table: marks of
// acknowledged batches, in seq order, below `below` (the stream's
// acknowledged tail when they were taken, at most the segment's first
// seq), within the bounds. A flight with any carried table is written as
// VersionCarried. Empty marks: nothing is recorded.
func (b *Builder) SetCarried(below uint64, marks []PassMark) {
	if b.seg < 0 {
		panic("format: SetCarried without an open segment")
	}
	if len(marks) == 0 {
		return
	}
	b.carried = append(b.carried, CarriedEntry{Entry: uint32(len(b.entries) - 1), Below: below, Marks: marks})
}

func appendCarriedTable(b []byte, cs []CarriedEntry) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(cs)))
	for _, c := range cs {
		b = binary.BigEndian.AppendUint32(b, c.Entry)
		b = binary.BigEndian.AppendUint32(b, uint32(len(c.Marks)))
		b = binary.BigEndian.AppendUint64(b, c.Below)
		for _, m := range c.Marks {
			b = appendPassMark(b, m)
		}
	}
	return b
}

func appendPassMark(b []byte, m PassMark) []byte {
	b = append(b, m.Producer[:]...)
	b = binary.BigEndian.AppendUint64(b, m.BatchSeq)
	b = binary.BigEndian.AppendUint64(b, m.FirstSeq)
	return binary.BigEndian.AppendUint64(b, m.LastSeq)
}

// parseCarriedTable decodes the carried table p (count and entries,
// nothing after): at least one entry, entry indexes strictly increasing
// and below entries, each entry's marks checked by CheckCarried against
// its Below, which must be at most what its index names (below(i): the
// carrying segment's first seq, or one past a pass stream's last seq).
func parseCarriedTable(p []byte, entries int, below func(i uint32) uint64) ([]CarriedEntry, error) {
	if len(p) < 4 {
		return nil, fmt.Errorf("carried table: %d bytes: %w", len(p), ErrTruncated)
	}
	n := binary.BigEndian.Uint32(p[0:4])
	if n == 0 || uint64(n) > uint64(entries) || uint64(n)*(carriedEntryFixed+carriedMarkSize) > uint64(len(p)-4) {
		return nil, fmt.Errorf("carried table: %d entries in %d bytes for %d segments: %w", n, len(p)-4, entries, ErrMalformed)
	}
	out := make([]CarriedEntry, n)
	q := p[4:]
	for i := range out {
		if len(q) < carriedEntryFixed {
			return nil, fmt.Errorf("carried entry %d: %d bytes left: %w", i, len(q), ErrTruncated)
		}
		e := binary.BigEndian.Uint32(q[0:4])
		k := binary.BigEndian.Uint32(q[4:8])
		at := binary.BigEndian.Uint64(q[8:16])
		if e >= uint32(entries) || (i > 0 && e <= out[i-1].Entry) {
			return nil, fmt.Errorf("carried entry %d: segment %d of %d, not after the previous: %w", i, e, entries, ErrMalformed)
		}
		if k == 0 || k > MaxCarriedMarks {
			return nil, fmt.Errorf("carried entry %d: %d marks (1 to %d): %w", i, k, MaxCarriedMarks, ErrMalformed)
		}
		size := carriedEntryFixed + int(k)*carriedMarkSize
		if len(q) < size {
			return nil, fmt.Errorf("carried entry %d: %d bytes left, needs %d: %w", i, len(q), size, ErrTruncated)
		}
		marks := make([]PassMark, k)
		for j := range marks {
			marks[j] = decodePassMark(q[carriedEntryFixed+j*carriedMarkSize:])
		}
		if lim := below(e); at > lim {
			return nil, fmt.Errorf("carried entry %d: acknowledged tail %d past seq %d: %w", i, at, lim, ErrMalformed)
		}
		if err := CheckCarried(marks, at); err != nil {
			return nil, fmt.Errorf("carried entry %d: %w", i, err)
		}
		out[i] = CarriedEntry{Entry: e, Below: at, Marks: marks}
		q = q[size:]
	}
	if len(q) != 0 {
		return nil, fmt.Errorf("carried table: %d bytes after the last entry: %w", len(q), ErrMalformed)
	}
	return out, nil
}

// CheckCarried checks a carried table's marks: at most MaxCarriedMarks,
// each with a producer and seqs below `below`, in seq order without
// overlap, at most MaxCarriedPerProducer of one producer. An error
// matches ErrMalformed.
func CheckCarried(marks []PassMark, below uint64) error {
	if len(marks) > MaxCarriedMarks {
		return fmt.Errorf("carried table: %d marks, at most %d: %w", len(marks), MaxCarriedMarks, ErrMalformed)
	}
	per := make(map[ProducerID]int, len(marks))
	for j, m := range marks {
		if m.Producer.IsZero() || m.LastSeq < m.FirstSeq || m.LastSeq >= below || (j > 0 && m.FirstSeq <= marks[j-1].LastSeq) {
			return fmt.Errorf("carried mark %d (seqs %d-%d): no producer, out of order, or not below seq %d: %w", j, m.FirstSeq, m.LastSeq, below, ErrMalformed)
		}
		if per[m.Producer]++; per[m.Producer] > MaxCarriedPerProducer {
			return fmt.Errorf("carried mark %d: more than %d marks of producer %x: %w", j, MaxCarriedPerProducer, m.Producer, ErrMalformed)
		}
	}
	return nil
}

// CarriedEntrySize is the bytes a carried table of n marks adds to a
// flight's carried table (the flight's count of entries, 4 bytes, is
// apart): at most CarriedEntrySize(MaxCarriedMarks), 40,976.
func CarriedEntrySize(n int) int { return carriedEntryFixed + n*carriedMarkSize }
