package format

import (
	"encoding/binary"
	"fmt"
)

const (
	footerEntrySize = 56
	footerMinLen    = 4 + 4
)

// FooterEntry locates one segment of a flight.
type FooterEntry struct {
	Stream    StreamID
	FirstSeq  uint64
	Count     uint32
	Offset    uint32 // object-absolute
	Length    uint32
	CRC       uint32
	FirstTsMs int64
	LastTsMs  int64
}

// LastSeq is the seq of the segment's last record.
func (e FooterEntry) LastSeq() uint64 { return e.FirstSeq + uint64(e.Count) - 1 }

// Builder renders one flight. It reuses its buffers across Reset calls, so a
// steady-state flusher renders without allocating. Use: Reset, then for each
// stream BeginSegment, AddRecords (one or more chunks of encoded records, in
// seq order), EndSegment; then Finish.
type Builder struct {
	buf      []byte
	entries  []FooterEntry
	batches  []BatchEntry
	commands []CommandEntry
	carried  []CarriedEntry
	env      Envelope
	seg      int // start of the open segment, -1 if none
	done     bool
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{seg: -1} }

// Reset starts a new flight for the slot.
func (b *Builder) Reset(epoch, slot uint64, nonce Nonce) {
	b.buf = append(b.buf[:0], make([]byte, EnvelopeSize)...)
	b.entries = b.entries[:0]
	b.batches = b.batches[:0]
	b.commands = b.commands[:0]
	b.carried = b.carried[:0]
	b.env = Envelope{Kind: KindFlight, Epoch: epoch, Slot: slot, Nonce: nonce}
	b.seg = -1
	b.done = false
}

// BeginSegment opens the segment of one stream.
func (b *Builder) BeginSegment(stream StreamID, firstSeq uint64) {
	if b.seg >= 0 {
		panic("format: BeginSegment with a segment open")
	}
	b.seg = len(b.buf)
	b.buf = append(b.buf, stream[:]...)
	b.buf = binary.BigEndian.AppendUint64(b.buf, firstSeq)
	b.buf = append(b.buf, 0, 0, 0, 0, 0, 0, 0, 0) // count, records length: set by EndSegment
	b.entries = append(b.entries, FooterEntry{Stream: stream, FirstSeq: firstSeq, Offset: uint32(b.seg)})
}

// AddRecords appends count encoded records (back to back) to the open
// segment; firstTs and lastTs are the first and last record's timestamps.
func (b *Builder) AddRecords(encoded []byte, count int, firstTs, lastTs int64) {
	e := &b.entries[len(b.entries)-1]
	if e.Count == 0 {
		e.FirstTsMs = firstTs
	}
	e.LastTsMs = lastTs
	e.Count += uint32(count)
	b.buf = append(b.buf, encoded...)
}

// EndSegment closes the open segment.
func (b *Builder) EndSegment() {
	e := &b.entries[len(b.entries)-1]
	s := b.seg
	rl := len(b.buf) - s - segmentHeader
	binary.BigEndian.PutUint32(b.buf[s+24:], e.Count)
	binary.BigEndian.PutUint32(b.buf[s+28:], uint32(rl))
	e.CRC = CRC(b.buf[s:])
	b.buf = binary.BigEndian.AppendUint32(b.buf, e.CRC)
	e.Length = uint32(len(b.buf) - s)
	b.seg = -1
}

// Entries are the footer entries so far (valid until the next Reset).
func (b *Builder) Entries() []FooterEntry { return b.entries }

// Len is the number of bytes rendered so far, envelope included.
func (b *Builder) Len() int { return len(b.buf) }

// Finish writes the footer and the envelope and returns the object; calling
// it again returns the same object. The bytes belong to the Builder until the
// next Reset.
func (b *Builder) Finish() []byte {
	if b.seg >= 0 {
		panic("format: Finish with a segment open")
	}
	if b.done {
		return b.buf
	}
	b.done = true
	off := len(b.buf)
	b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(b.entries)))
	for _, e := range b.entries {
		b.buf = appendEntry(b.buf, e)
	}
	switch {
	case len(b.carried) > 0:
		b.env.Version = VersionCarried
		b.buf = appendBatchTable(b.buf, b.batches)
		b.buf = appendCommandTable(b.buf, b.commands)
		b.buf = appendCarriedTable(b.buf, b.carried)
	case len(b.commands) > 0:
		b.env.Version = VersionCommands
		b.buf = appendBatchTable(b.buf, b.batches)
		b.buf = appendCommandTable(b.buf, b.commands)
	case len(b.batches) > 0:
		b.env.Version = VersionBatches
		b.buf = appendBatchTable(b.buf, b.batches)
	}
	b.buf = binary.BigEndian.AppendUint32(b.buf, CRC(b.buf[off:]))
	b.env.FooterOff = uint32(off)
	b.env.FooterLen = uint32(len(b.buf) - off)
	b.env.Size = uint64(len(b.buf))
	b.env.Put(b.buf[:EnvelopeSize])
	return b.buf
}

func appendEntry(b []byte, e FooterEntry) []byte {
	b = append(b, e.Stream[:]...)
	b = binary.BigEndian.AppendUint64(b, e.FirstSeq)
	b = binary.BigEndian.AppendUint32(b, e.Count)
	b = binary.BigEndian.AppendUint32(b, e.Offset)
	b = binary.BigEndian.AppendUint32(b, e.Length)
	b = binary.BigEndian.AppendUint32(b, e.CRC)
	b = binary.BigEndian.AppendUint64(b, uint64(e.FirstTsMs))
	return binary.BigEndian.AppendUint64(b, uint64(e.LastTsMs))
}

// ParseFooter decodes a flight's footer, as read at env's footer offset and
// length, and checks its CRC and that every segment lies between the
// envelope and the footer without overlapping. A version-2 footer's batch
// table is checked and dropped (see ParseFooterBatches).
func ParseFooter(env Envelope, b []byte) ([]FooterEntry, error) {
	entries, _, err := ParseFooterBatches(env, b)
	return entries, err
}

// ParseFooterBatches is ParseFooter that also returns the batch table of a
// version-2 or version-3 flight (nil for version 1).
func ParseFooterBatches(env Envelope, b []byte) ([]FooterEntry, []BatchEntry, error) {
	f, err := ParseFooterTables(env, b)
	return f.Entries, f.Batches, err
}

// Footer is a parsed footer: the segments' entries and the tables of later
// versions.
type Footer struct {
	Entries  []FooterEntry
	Batches  []BatchEntry   // versions 2 and 3: the producer batches
	Commands []CommandEntry // versions 3 and 4: the streams' command state
	Carried  []CarriedEntry // version 4: the streams' carried dedupe tables
}

// ParseFooterTables is ParseFooter that also returns the batch table
// (versions 2 and 3) and the command table (version 3).
func ParseFooterTables(env Envelope, b []byte) (Footer, error) {
	if env.Kind != KindFlight {
		return Footer{}, fmt.Errorf("footer of a %s: %w", env.Kind, ErrKind)
	}
	if uint32(len(b)) != env.FooterLen || len(b) < footerMinLen {
		return Footer{}, fmt.Errorf("footer: %d bytes, envelope says %d: %w", len(b), env.FooterLen, ErrTruncated)
	}
	end := len(b) - 4
	if got, want := CRC(b[:end]), binary.BigEndian.Uint32(b[end:]); got != want {
		return Footer{}, fmt.Errorf("footer: crc %08x, stored %08x: %w", got, want, ErrCRC)
	}
	n := binary.BigEndian.Uint32(b[0:4])
	entriesEnd := uint64(4) + uint64(n)*footerEntrySize
	// Versions 2 and 3: the batch table follows the entries.
	if entriesEnd > uint64(end) || (env.Version == 0 && entriesEnd != uint64(end)) {
		return Footer{}, fmt.Errorf("footer: %d entries in %d bytes: %w", n, end-4, ErrMalformed)
	}
	out := make([]FooterEntry, n)
	next := uint64(EnvelopeSize)
	for i := range out {
		p := b[4+i*footerEntrySize:]
		e := &out[i]
		copy(e.Stream[:], p[0:16])
		e.FirstSeq = binary.BigEndian.Uint64(p[16:24])
		e.Count = binary.BigEndian.Uint32(p[24:28])
		e.Offset = binary.BigEndian.Uint32(p[28:32])
		e.Length = binary.BigEndian.Uint32(p[32:36])
		e.CRC = binary.BigEndian.Uint32(p[36:40])
		e.FirstTsMs = int64(binary.BigEndian.Uint64(p[40:48]))
		e.LastTsMs = int64(binary.BigEndian.Uint64(p[48:56]))
		if uint64(e.Offset) != next || e.Length < segmentOverhead || uint64(e.Offset)+uint64(e.Length) > uint64(env.FooterOff) {
			return Footer{}, fmt.Errorf("footer entry %d: segment %d+%d (expected at %d, footer at %d): %w", i, e.Offset, e.Length, next, env.FooterOff, ErrBounds)
		}
		if e.Count == 0 || e.FirstSeq+uint64(e.Count) < e.FirstSeq {
			return Footer{}, fmt.Errorf("footer entry %d: %d records from seq %d: %w", i, e.Count, e.FirstSeq, ErrMalformed)
		}
		next = uint64(e.Offset) + uint64(e.Length)
	}
	if next != uint64(env.FooterOff) {
		return Footer{}, fmt.Errorf("footer: segments end at %d, footer at %d: %w", next, env.FooterOff, ErrBounds)
	}
	f := Footer{Entries: out}
	if env.Version == 0 {
		return f, nil
	}
	batchEnd := uint64(end)
	if env.Version == VersionCommands || env.Version == VersionCarried {
		// The batch table's length follows from its count.
		if entriesEnd+4 > uint64(end) {
			return Footer{}, fmt.Errorf("footer: no batch table: %w", ErrTruncated)
		}
		batchEnd = entriesEnd + 4 + uint64(binary.BigEndian.Uint32(b[entriesEnd:]))*batchEntrySize
		if batchEnd > uint64(end) {
			return Footer{}, fmt.Errorf("footer: batch table past the footer's end: %w", ErrMalformed)
		}
		cs, rest, err := parseCommandTablePrefix(b[batchEnd:end], len(out), env.Version == VersionCarried)
		if err != nil {
			return Footer{}, fmt.Errorf("footer: %w", err)
		}
		switch {
		case env.Version == VersionCarried:
			// The carried table fills the rest: each mark below its
			// segment's first seq.
			f.Carried, err = parseCarriedTable(rest, len(out), func(i uint32) uint64 { return out[i].FirstSeq })
			if err != nil {
				return Footer{}, fmt.Errorf("footer: %w", err)
			}
		case len(rest) != 0:
			return Footer{}, fmt.Errorf("footer: command table: %d bytes after the last entry: %w", len(rest), ErrMalformed)
		}
		f.Commands = cs
	}
	batches, err := parseBatchTable(b[entriesEnd:batchEnd], out, env.Version >= VersionCommands)
	if err != nil {
		return Footer{}, fmt.Errorf("footer: %w", err)
	}
	f.Batches = batches
	return f, nil
}

// Flight is a fully parsed and checked flight object.
type Flight struct {
	Envelope Envelope
	Entries  []FooterEntry
	Batches  []BatchEntry // versions 2 and 3: the producer batches
	Commands []CommandEntry
	Carried  []CarriedEntry // version 4: the streams' carried dedupe tables
}

// ParseFlight checks a whole flight object: envelope, footer and every
// segment's CRC and consistency with its footer entry.
func ParseFlight(obj []byte) (Flight, error) {
	env, err := ParseEnvelope(obj)
	if err != nil {
		return Flight{}, err
	}
	if env.Kind != KindFlight {
		return Flight{}, fmt.Errorf("flight: object is a %s: %w", env.Kind, ErrKind)
	}
	if uint64(len(obj)) != env.Size {
		return Flight{}, fmt.Errorf("flight: %d bytes, envelope says %d: %w", len(obj), env.Size, ErrTruncated)
	}
	foot, err := ParseFooterTables(env, obj[env.FooterOff:])
	if err != nil {
		return Flight{}, err
	}
	entries := foot.Entries
	for i, e := range entries {
		info, recs, err := ParseSegment(obj[e.Offset : e.Offset+e.Length])
		if err != nil {
			return Flight{}, fmt.Errorf("flight segment %d: %w", i, err)
		}
		if info.Stream != e.Stream || info.FirstSeq != e.FirstSeq || info.Count != e.Count || binary.BigEndian.Uint32(obj[e.Offset+e.Length-4:]) != e.CRC {
			return Flight{}, fmt.Errorf("flight segment %d disagrees with its footer entry: %w", i, ErrMalformed)
		}
		if _, err := DecodeRecords(recs, int(e.Count)); err != nil {
			return Flight{}, fmt.Errorf("flight segment %d: %w", i, err)
		}
	}
	return Flight{Envelope: env, Entries: entries, Batches: foot.Batches, Commands: foot.Commands, Carried: foot.Carried}, nil
}
