package format

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Pass index layout sizes. Frozen: part of pass index versions 1 and 2.
const (
	passHeaderSize  = 48
	passStreamSize  = 72
	passSegmentSize = 32
	passMarkSize    = 40
	// PassIndexVersion is the pass index format version of an index
	// without command state; PassIndexVersionCommands, the version with a
	// command table (the streams' fencing tokens, trim points and
	// configurations, ADR 0042). A writer writes version 2 exactly when a
	// stream has command state, so an index's bytes stay a pure function
	// of its content; readers decode both.
	PassIndexVersion         = 1
	PassIndexVersionCommands = 2
	// PassIndexVersionCarried is the version with a carried table after
	// the command table (which may then be empty): the streams' carried
	// dedupe tables (ADR 0062, carried.go). Written exactly when a stream
	// has one.
	PassIndexVersionCarried = 3
)

var passMagic = [4]byte{'S', 'T', 'R', 'I'}

// PassIndex is the index of one absorb pass [FirstSlot, EndSlot) of one
// epoch of a chain: for each stream that rode it, in stream id order, the
// stream's seq range, timestamps, record bytes, segments and producer
// marks. It replaces the pass's per-stream refs (design 014).
type PassIndex struct {
	Epoch     uint64
	FirstSlot uint64
	EndSlot   uint64 // exclusive; the next pass starts here
	Streams   []PassStream
	// Digest names the plan of a run or merged run (design 014, "One
	// commit point per step"): its packs are at keys that carry it
	// (PackKey, MergedPackKey), so two plans of one run never write one
	// key. 0 in a pass index and in a run written before it (its packs at
	// the keys without it). Encoded in the header's last 4 bytes.
	Digest uint32
	// Merged is not encoded: it says that this index is a merged run
	// (design 014, level 2: MergedRunKey, its packs at MergedPackKey), set
	// by whoever read it from that key or wrote it there.
	Merged bool
}

// PassStream is one stream's part of a pass.
type PassStream struct {
	Stream    StreamID
	FirstSeq  uint64
	LastSeq   uint64 // inclusive
	FirstTsMs int64
	LastTsMs  int64
	Bytes     int64 // encoded record bytes (segment payloads)
	Segments  []PassSegment
	Marks     []PassMark
	// Commands is the stream's command state as of LastSeq (nil: none of
	// the pass's segments of the stream carried any): what a ref's
	// Commands holds. Versions 2 and 3.
	Commands *StreamCommands
	// Carried is the newest carried table among the part's segments (the
	// flights' carried tables, ADR 0062): what a ref's Carried holds, each
	// mark below CarriedBelow. Version 3 only.
	Carried []PassMark
	// CarriedBelow is the table's acknowledged tail (CarriedEntry.Below),
	// at most LastSeq+1; 0 without a table.
	CarriedBelow uint64
}

// PassSegment is one segment of a stream in one slot of the pass.
type PassSegment struct {
	Slot     uint64 // the slot holding the segment (key: SlotKey(star, epoch, slot))
	FirstSeq uint64
	Count    uint32
	Offset   uint32 // object-absolute
	Length   uint32
	CRC      uint32
}

// Marker reports whether s is a marker: an entry of a run index (design
// 014, level 1) without segments, saying that the stream's seqs
// FirstSeq..LastSeq were flushed behind a ref by the settle step that
// wrote the run. A marker has no bytes, marks or command state.
func (s *PassStream) Marker() bool { return len(s.Segments) == 0 }

// LastSeq is the seq of the segment's last record.
func (s PassSegment) LastSeq() uint64 { return s.FirstSeq + uint64(s.Count) - 1 }

// PassMark is one idempotent producer batch the stream's part of the pass
// holds (exactly-once appends): what a ref's ProducerMark holds.
type PassMark struct {
	Producer ProducerID
	BatchSeq uint64
	FirstSeq uint64
	LastSeq  uint64
}

// PassIndexKey is a pass index's key in the settled bucket:
// index/<star>/<class>/<epoch>/<first-slot>, numbers zero-padded to 20
// digits. The pass that starts at a slot is unique (the absorb lease), so
// the key determines the content.
func PassIndexKey(star, class string, epoch, firstSlot uint64) string {
	return fmt.Sprintf("index/%s/%s/%020d/%020d", star, class, epoch, firstSlot)
}

// RunIndexKey is where a run index lives in the settled bucket (design
// 014, level 1): one settle step's run [firstSlot, end) of an epoch, in
// the pass index format, its segments in packs (PackKey). Outside the
// pass indexes' prefix of any epoch: listing one epoch's passes never
// lists runs.
func RunIndexKey(star, class string, epoch, firstSlot uint64) string {
	return fmt.Sprintf("index/%s/%s/runs/%020d/%020d", star, class, epoch, firstSlot)
}

// MergedRunKey is where a merged run lives (design 014, level 2): the
// level-1 runs [firstSlot, end) of an epoch merged, in the pass index
// format, its segments in packs at MergedPackKey.
func MergedRunKey(star, class string, epoch, firstSlot uint64) string {
	return fmt.Sprintf("index/%s/%s/merged/%020d/%020d", star, class, epoch, firstSlot)
}

// MergedPackKey is where pack `slot` of the merged run [firstSlot,
// endSlot) whose digest is digest lives (as PackKey for a level-1 run).
func MergedPackKey(star, class string, epoch, firstSlot, endSlot uint64, digest uint32, slot uint64) string {
	return MergedPackPrefix(star, class, epoch, firstSlot) + packTail(endSlot, digest, slot)
}

// MergedPackPrefix is the prefix of every pack of every merged run at
// firstSlot.
func MergedPackPrefix(star, class string, epoch, firstSlot uint64) string {
	return fmt.Sprintf("packs/%s/%s/merged/%020d/%020d-", star, class, epoch, firstSlot)
}

// PackKey is where pack `slot` of the run [firstSlot, endSlot) whose
// plan has digest `digest` (PassIndex.Digest) lives in the settled
// bucket: the run's segments copied back to back. A run index's segment
// names its pack by its Slot field, firstSlot+n for the run's n-th pack.
// The end and the digest are in the key so that two plans of a run at
// one first slot (settle copies that read different checkpoints, or
// decided otherwise: another flush rule after a deploy, a copy that
// planned on another head) never write one key with different bytes: a
// plan's packs are a function of its key (design 014, "One commit point
// per step"). A run without a digest (0: written before it) has its
// packs at <end>/<slot>; with one, at <end>-<digest, 8 hex digits>/<slot>.
func PackKey(star, class string, epoch, firstSlot, endSlot uint64, digest uint32, slot uint64) string {
	return PackPrefix(star, class, epoch, firstSlot) + packTail(endSlot, digest, slot)
}

func packTail(endSlot uint64, digest uint32, slot uint64) string {
	if digest == 0 {
		return fmt.Sprintf("%020d/%020d", endSlot, slot)
	}
	return fmt.Sprintf("%020d-%08x/%020d", endSlot, digest, slot)
}

// PackPrefix is the prefix of every pack of every plan of the run at
// firstSlot (what trim deletes once the run is flushed).
func PackPrefix(star, class string, epoch, firstSlot uint64) string {
	return fmt.Sprintf("packs/%s/%s/%020d/%020d-", star, class, epoch, firstSlot)
}

// PackKeyParts is what a pack key names (ParsePackKey).
type PackKeyParts struct {
	Star, Class      string
	Merged           bool // a merged run's (MergedPackKey)
	Epoch, FirstSlot uint64
	EndSlot          uint64
	Digest           uint32 // 0: a run written before digests
	Slot             uint64
}

// ParsePackKey decodes a key PackKey or MergedPackKey made, and reports
// whether it is one: exactly that function's output for the parts, so a
// key it accepts is never another object's (a run index, a settled
// object, a key with other padding).
func ParsePackKey(key string) (PackKeyParts, bool) {
	var p PackKeyParts
	rest, ok := strings.CutPrefix(key, "packs/")
	if !ok {
		return p, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) == 6 && parts[2] == "merged" {
		p.Merged = true
		parts = append(parts[:2], parts[3:]...)
	}
	if len(parts) != 5 {
		return p, false
	}
	p.Star, p.Class = parts[0], parts[1]
	first, end, ok := strings.Cut(parts[3], "-")
	if !ok {
		return p, false
	}
	if e, d, ok := strings.Cut(end, "-"); ok {
		dg, err := strconv.ParseUint(d, 16, 32)
		if err != nil || dg == 0 {
			return p, false
		}
		end, p.Digest = e, uint32(dg)
	}
	var err error
	for _, f := range []struct {
		s string
		v *uint64
	}{{parts[2], &p.Epoch}, {first, &p.FirstSlot}, {end, &p.EndSlot}, {parts[4], &p.Slot}} {
		if *f.v, err = strconv.ParseUint(f.s, 10, 64); err != nil {
			return p, false
		}
	}
	keyOf := PackKey
	if p.Merged {
		keyOf = MergedPackKey
	}
	if keyOf(p.Star, p.Class, p.Epoch, p.FirstSlot, p.EndSlot, p.Digest, p.Slot) != key {
		return p, false
	}
	return p, true
}

// Find returns the index of stream id's first entry in p.Streams (binary
// search: the streams are sorted by id) and whether it is there. A merged
// run may hold a second entry of the stream right after it (FindAll).
func (p *PassIndex) Find(id StreamID) (int, bool) {
	i := sort.Search(len(p.Streams), func(i int) bool { return bytes.Compare(p.Streams[i].Stream[:], id[:]) >= 0 })
	return i, i < len(p.Streams) && p.Streams[i].Stream == id
}

// FindAll returns stream id's entries in p, in order: none, one, or (a
// merged run, design 014 level 2) a marker then a packed entry.
func (p *PassIndex) FindAll(id StreamID) []PassStream {
	i, ok := p.Find(id)
	if !ok {
		return nil
	}
	j := i + 1
	for j < len(p.Streams) && p.Streams[j].Stream == id {
		j++
	}
	return p.Streams[i:j:j]
}

// AppendPassIndex appends p's encoding to b. p must be valid (what
// ParsePassIndex accepts); it is checked, and an invalid p is an error
// matching ErrMalformed (or ErrTooLong for counts over 32 bits).
func AppendPassIndex(b []byte, p PassIndex) ([]byte, error) {
	if err := checkPassIndex(&p); err != nil {
		return b, err
	}
	var nSeg, nMark int
	var cmds []CommandEntry    // the command table: entries are stream indexes
	var carried []CarriedEntry // the carried table: likewise
	for i, s := range p.Streams {
		nSeg += len(s.Segments)
		nMark += len(s.Marks)
		if s.Commands != nil {
			cmds = append(cmds, CommandEntry{Entry: uint32(i), Commands: *s.Commands})
		}
		if len(s.Carried) > 0 {
			carried = append(carried, CarriedEntry{Entry: uint32(i), Below: s.CarriedBelow, Marks: s.Carried})
		}
	}
	version := uint16(PassIndexVersion)
	switch {
	case len(carried) > 0:
		version = PassIndexVersionCarried
	case len(cmds) > 0:
		version = PassIndexVersionCommands
	}
	if uint64(len(p.Streams)) > 1<<32-1 || uint64(nSeg) > 1<<32-1 || uint64(nMark) > 1<<32-1 {
		return b, fmt.Errorf("pass index: %d streams, %d segments, %d marks: %w", len(p.Streams), nSeg, nMark, ErrTooLong)
	}
	start := len(b)
	b = append(b, passMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, version)
	b = append(b, byte(KindPassIndex), 0)
	b = binary.BigEndian.AppendUint64(b, p.Epoch)
	b = binary.BigEndian.AppendUint64(b, p.FirstSlot)
	b = binary.BigEndian.AppendUint64(b, p.EndSlot)
	b = binary.BigEndian.AppendUint32(b, uint32(len(p.Streams)))
	b = binary.BigEndian.AppendUint32(b, uint32(nSeg))
	b = binary.BigEndian.AppendUint32(b, uint32(nMark))
	b = binary.BigEndian.AppendUint32(b, p.Digest)
	var seg, mark uint32
	for _, s := range p.Streams {
		b = append(b, s.Stream[:]...)
		b = binary.BigEndian.AppendUint64(b, s.FirstSeq)
		b = binary.BigEndian.AppendUint64(b, s.LastSeq)
		b = binary.BigEndian.AppendUint64(b, uint64(s.FirstTsMs))
		b = binary.BigEndian.AppendUint64(b, uint64(s.LastTsMs))
		b = binary.BigEndian.AppendUint64(b, uint64(s.Bytes))
		b = binary.BigEndian.AppendUint32(b, seg)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s.Segments)))
		b = binary.BigEndian.AppendUint32(b, mark)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s.Marks)))
		seg += uint32(len(s.Segments))
		mark += uint32(len(s.Marks))
	}
	for _, s := range p.Streams {
		for _, g := range s.Segments {
			b = binary.BigEndian.AppendUint64(b, g.Slot)
			b = binary.BigEndian.AppendUint64(b, g.FirstSeq)
			b = binary.BigEndian.AppendUint32(b, g.Count)
			b = binary.BigEndian.AppendUint32(b, g.Offset)
			b = binary.BigEndian.AppendUint32(b, g.Length)
			b = binary.BigEndian.AppendUint32(b, g.CRC)
		}
	}
	for _, s := range p.Streams {
		for _, m := range s.Marks {
			b = append(b, m.Producer[:]...)
			b = binary.BigEndian.AppendUint64(b, m.BatchSeq)
			b = binary.BigEndian.AppendUint64(b, m.FirstSeq)
			b = binary.BigEndian.AppendUint64(b, m.LastSeq)
		}
	}
	if version >= PassIndexVersionCommands {
		b = appendCommandTable(b, cmds)
	}
	if version == PassIndexVersionCarried {
		b = appendCarriedTable(b, carried)
	}
	return binary.BigEndian.AppendUint32(b, CRC(b[start:])), nil
}

// parseCommandTail decodes the tables after a version 2 or 3 object's
// fixed-size tables, CRC excluded: the command table (at least one entry in
// version 2), then in version 3 the carried table (below(i): one past
// stream i's last seq).
func parseCommandTail(version uint16, p []byte, streams int, below func(uint32) uint64) ([]CommandEntry, []CarriedEntry, error) {
	if version == PassIndexVersionCommands {
		cmds, err := parseCommandTable(p, streams)
		return cmds, nil, err
	}
	cmds, rest, err := parseCommandTablePrefix(p, streams, true)
	if err != nil {
		return nil, nil, err
	}
	carried, err := parseCarriedTable(rest, streams, below)
	if err != nil {
		return nil, nil, err
	}
	return cmds, carried, nil
}

// ParsePassIndex decodes a pass index object. It checks the CRC first and
// the size against the counts before it allocates anything, then every
// invariant AppendPassIndex keeps (see checkPassIndex), so a hostile
// object costs at most its own size.
func ParsePassIndex(obj []byte) (PassIndex, error) {
	if len(obj) < passHeaderSize+4 {
		return PassIndex{}, fmt.Errorf("pass index: %d bytes: %w", len(obj), ErrTruncated)
	}
	if [4]byte(obj[0:4]) != passMagic {
		return PassIndex{}, fmt.Errorf("pass index: magic %q: %w", obj[0:4], ErrMagic)
	}
	version := binary.BigEndian.Uint16(obj[4:6])
	if version < PassIndexVersion || version > PassIndexVersionCarried {
		return PassIndex{}, fmt.Errorf("pass index: version %d: %w", version, ErrVersion)
	}
	if k := Kind(obj[6]); k != KindPassIndex || obj[7] != 0 {
		return PassIndex{}, fmt.Errorf("pass index: kind %d, reserved %d: %w", k, obj[7], ErrKind)
	}
	body := obj[:len(obj)-4]
	if got, want := CRC(body), binary.BigEndian.Uint32(obj[len(obj)-4:]); got != want {
		return PassIndex{}, fmt.Errorf("pass index: crc %08x, stored %08x: %w", got, want, ErrCRC)
	}
	p := PassIndex{
		Epoch:     binary.BigEndian.Uint64(obj[8:16]),
		FirstSlot: binary.BigEndian.Uint64(obj[16:24]),
		EndSlot:   binary.BigEndian.Uint64(obj[24:32]),
	}
	nStream := uint64(binary.BigEndian.Uint32(obj[32:36]))
	nSeg := uint64(binary.BigEndian.Uint32(obj[36:40]))
	nMark := uint64(binary.BigEndian.Uint32(obj[40:44]))
	p.Digest = binary.BigEndian.Uint32(obj[44:48])
	want := passHeaderSize + nStream*passStreamSize + nSeg*passSegmentSize + nMark*passMarkSize + 4
	if want > uint64(len(obj)) || (version == PassIndexVersion && want != uint64(len(obj))) {
		return PassIndex{}, fmt.Errorf("pass index: %d streams, %d segments, %d marks need %d bytes, have %d: %w", nStream, nSeg, nMark, want, len(obj), ErrBounds)
	}
	var cmds []CommandEntry
	var carried []CarriedEntry
	if version >= PassIndexVersionCommands {
		// The command table (and, version 3, the carried table) fills the
		// rest: stream indexes strictly increasing and in range.
		var err error
		if cmds, carried, err = parseCommandTail(version, obj[want-4:len(obj)-4], int(nStream), func(i uint32) uint64 {
			// A mark at or below the stream's last seq (checked again,
			// with the stream decoded, by checkPassIndex).
			return binary.BigEndian.Uint64(obj[passHeaderSize+int(i)*passStreamSize+24:]) + 1
		}); err != nil {
			return PassIndex{}, fmt.Errorf("pass index: %w", err)
		}
	}
	segs := make([]PassSegment, nSeg)
	segAt := passHeaderSize + int(nStream)*passStreamSize
	for i := range segs {
		segs[i] = decodePassSegment(obj[segAt+i*passSegmentSize:])
	}
	marks := make([]PassMark, nMark)
	markAt := segAt + int(nSeg)*passSegmentSize
	for i := range marks {
		marks[i] = decodePassMark(obj[markAt+i*passMarkSize:])
	}
	p.Streams = make([]PassStream, nStream)
	var seg, mark uint64
	for i := range p.Streams {
		var sf, sn, mf, mn uint32
		s := decodePassEntry(obj[passHeaderSize+i*passStreamSize:], &sf, &sn, &mf, &mn)
		segFirst, segN, markFirst, markN := uint64(sf), uint64(sn), uint64(mf), uint64(mn)
		if segFirst != seg || markFirst != mark || seg+segN > nSeg || mark+markN > nMark {
			return PassIndex{}, fmt.Errorf("pass index: stream %d: segments %d+%d, marks %d+%d out of order or bounds: %w", i, segFirst, segN, markFirst, markN, ErrBounds)
		}
		s.Segments = segs[seg : seg+segN : seg+segN]
		if markN > 0 {
			s.Marks = marks[mark : mark+markN : mark+markN]
		}
		seg, mark = seg+segN, mark+markN
		p.Streams[i] = s
	}
	if seg != nSeg || mark != nMark {
		return PassIndex{}, fmt.Errorf("pass index: streams hold %d of %d segments, %d of %d marks: %w", seg, nSeg, mark, nMark, ErrBounds)
	}
	for _, c := range cmds {
		cs := c.Commands
		p.Streams[c.Entry].Commands = &cs
	}
	for _, c := range carried {
		p.Streams[c.Entry].Carried, p.Streams[c.Entry].CarriedBelow = c.Marks, c.Below
	}
	if err := checkPassIndex(&p); err != nil {
		return PassIndex{}, err
	}
	return p, nil
}

// checkPassIndex checks what a pass index promises its readers: a
// non-empty slot range; streams in strictly ascending id order (except
// that a marker may be followed by a packed entry of the same stream with
// later seqs: a merged run's, design 014 level 2); each not a marker with
// at least one segment, segments in slot order inside the pass with
// contiguous seqs from FirstSeq to LastSeq, at least one record each;
// timestamps not decreasing; record bytes not negative; marks in seq
// order, not overlapping, inside the stream's seqs; command state within
// its bounds.
func checkPassIndex(p *PassIndex) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("pass index: "+format+": %w", append(args, ErrMalformed)...)
	}
	if p.EndSlot <= p.FirstSlot {
		return bad("slots %d-%d", p.FirstSlot, p.EndSlot)
	}
	for i, s := range p.Streams {
		if i > 0 {
			prev := &p.Streams[i-1]
			switch c := bytes.Compare(prev.Stream[:], s.Stream[:]); {
			case c > 0:
				return bad("stream %d (%s) not after stream %d", i, s.Stream, i-1)
			case c == 0 && !(prev.Marker() && !s.Marker() && s.FirstSeq > prev.LastSeq):
				return bad("stream %d (%s) twice: only a marker then a packed entry with later seqs", i, s.Stream)
			}
		}
		if s.FirstTsMs > s.LastTsMs || s.Bytes < 0 || s.LastSeq == ^uint64(0) {
			return bad("stream %s: timestamps %d-%d, bytes %d, last seq %d", s.Stream, s.FirstTsMs, s.LastTsMs, s.Bytes, s.LastSeq)
		}
		if s.Marker() {
			if s.Bytes != 0 || len(s.Marks) != 0 || s.Commands != nil || len(s.Carried) != 0 || s.CarriedBelow != 0 || s.FirstSeq > s.LastSeq {
				return bad("marker of stream %s: seqs %d-%d, %d bytes, %d marks, commands %t, %d carried", s.Stream, s.FirstSeq, s.LastSeq, s.Bytes, len(s.Marks), s.Commands != nil, len(s.Carried))
			}
			continue
		}
		next, slot := s.FirstSeq, p.FirstSlot
		for j, g := range s.Segments {
			if g.Count == 0 || g.FirstSeq != next || g.Slot < slot || g.Slot >= p.EndSlot || g.LastSeq() < g.FirstSeq {
				return bad("stream %s: segment %d (slot %d, seqs %d+%d) does not continue at seq %d in slots %d-%d", s.Stream, j, g.Slot, g.FirstSeq, g.Count, next, slot, p.EndSlot)
			}
			next, slot = g.LastSeq()+1, g.Slot
		}
		if next-1 != s.LastSeq {
			return bad("stream %s: segments end at seq %d, stream at %d", s.Stream, next-1, s.LastSeq)
		}
		after := s.FirstSeq
		for j, m := range s.Marks {
			if m.Producer.IsZero() || m.FirstSeq < after || m.LastSeq < m.FirstSeq || m.LastSeq > s.LastSeq {
				return bad("stream %s: mark %d (seqs %d-%d) out of order or outside %d-%d", s.Stream, j, m.FirstSeq, m.LastSeq, after, s.LastSeq)
			}
			after = m.LastSeq + 1
		}
		if s.Commands != nil {
			if err := s.Commands.Validate(); err != nil {
				return bad("stream %s: %v", s.Stream, err)
			}
		}
		if (len(s.Carried) == 0 && s.CarriedBelow != 0) || s.CarriedBelow > s.LastSeq+1 {
			return bad("stream %s: carried table's acknowledged tail %d (%d marks) past seq %d", s.Stream, s.CarriedBelow, len(s.Carried), s.LastSeq+1)
		}
		if err := CheckCarried(s.Carried, s.CarriedBelow); err != nil {
			return bad("stream %s: %v", s.Stream, err)
		}
	}
	return nil
}
