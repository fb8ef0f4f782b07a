package format

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Settled object constants. Frozen: part of the format.
const (
	SettledHeaderSize = 64
	settledMagic      = "STRS"
)

// SettledHeader is the 64-byte header of a settled object.
type SettledHeader struct {
	Stream    StreamID
	FirstSeq  uint64
	LastSeq   uint64
	FirstTsMs int64
	LastTsMs  int64
	SegLen    uint32
}

// AppendSettled renders a settled object for one stream from its records,
// already encoded back to back in chunks. A segment past its 32-bit
// lengths, or more than 2^32-1 seqs, is ErrTooLong (b unchanged).
func AppendSettled(b []byte, h SettledHeader, chunks ...[]byte) ([]byte, error) {
	rl := 0
	for _, c := range chunks {
		rl += len(c)
	}
	if uint64(rl) > MaxSegmentRecords || h.LastSeq < h.FirstSeq || h.LastSeq-h.FirstSeq >= math.MaxUint32 {
		return b, fmt.Errorf("settled object of seqs %d..%d, %d record bytes: %w", h.FirstSeq, h.LastSeq, rl, ErrTooLong)
	}
	h.SegLen = uint32(SegmentSize(rl))
	b = appendSettledHeader(b, h)
	return AppendSegment(b, SegmentInfo{Stream: h.Stream, FirstSeq: h.FirstSeq, Count: uint32(h.LastSeq - h.FirstSeq + 1)}, chunks...)
}

func appendSettledHeader(b []byte, h SettledHeader) []byte {
	start := len(b)
	b = append(b, settledMagic...)
	b = binary.BigEndian.AppendUint16(b, Version)
	b = append(b, byte(KindSettled), 0)
	b = append(b, h.Stream[:]...)
	b = binary.BigEndian.AppendUint64(b, h.FirstSeq)
	b = binary.BigEndian.AppendUint64(b, h.LastSeq)
	b = binary.BigEndian.AppendUint64(b, uint64(h.FirstTsMs))
	b = binary.BigEndian.AppendUint64(b, uint64(h.LastTsMs))
	b = binary.BigEndian.AppendUint32(b, h.SegLen)
	return binary.BigEndian.AppendUint32(b, CRC(b[start:]))
}

// SettledBuilder renders one settled object while its records arrive, in
// one buffer: building it takes the object's size in memory, not a copy of
// every input besides. The result is byte for byte AppendSettled's.
//
// Each byte is written once and read once more, while it is in cache: Add
// copies its records in pieces of settledChunk bytes and extends the CRC
// of the records over each piece just written; Finish computes the
// segment's CRC from that and its header's (CRCCombine), not in a second
// pass over the whole object (issue 36). The CRC is of the bytes in the
// object, as before: a copy that went wrong is not hidden by it.
type SettledBuilder struct {
	buf   []byte
	h     SettledHeader
	count uint64
	crc   uint32 // CRC-32C of the records added so far
}

// settledChunk is the bytes Add copies and checksums at a time: well
// inside a core's L2 cache, and a bounded stretch of copying the runtime
// cannot preempt (runtime.memmove is not a preemption point, and a
// stop-the-world waits for it).
const settledChunk = 64 << 10

// NewSettledBuilder starts the object of stream from seq first; sizeHint
// is the expected record bytes (capacity only).
func NewSettledBuilder(stream StreamID, first uint64, sizeHint int) *SettledBuilder {
	return NewSettledBuilderIn(nil, stream, first, sizeHint)
}

// NewSettledBuilderIn is NewSettledBuilder rendering into buf's memory
// (its bytes are overwritten) when its capacity holds sizeHint record
// bytes, else into a new buffer: a caller that puts one object after
// another reuses one buffer instead of touching new memory for each
// (issue 36). Finish's result is then buf's memory.
func NewSettledBuilderIn(buf []byte, stream StreamID, first uint64, sizeHint int) *SettledBuilder {
	if n := SettledBufferSize(sizeHint); cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	return &SettledBuilder{buf: buf[:SettledHeaderSize+segmentHeader], h: SettledHeader{Stream: stream, FirstSeq: first}}
}

// SettledBufferSize is the bytes of a settled object of recordBytes of
// records: its header, segment header and CRC besides.
func SettledBufferSize(recordBytes int) int {
	return SettledHeaderSize + segmentHeader + max(recordBytes, 0) + 4
}

// Len is the record bytes added so far.
func (b *SettledBuilder) Len() int { return len(b.buf) - SettledHeaderSize - segmentHeader }

// Count is the records added so far.
func (b *SettledBuilder) Count() int { return int(b.count) }

// Add appends count records (encoded back to back) whose first and last
// timestamps are firstTs and lastTs. What the object's 32-bit lengths or
// count could not hold is ErrTooLong, and nothing is added.
func (b *SettledBuilder) Add(encoded []byte, count int, firstTs, lastTs int64) error {
	if count <= 0 || uint64(b.Len())+uint64(len(encoded)) > MaxSegmentRecords || b.count+uint64(count) > math.MaxUint32 {
		return fmt.Errorf("settled object from seq %d: add %d records (%d bytes) to %d (%d bytes): %w",
			b.h.FirstSeq, count, len(encoded), b.count, b.Len(), ErrTooLong)
	}
	if b.count == 0 {
		b.h.FirstTsMs = firstTs
	}
	b.h.LastTsMs = lastTs
	b.count += uint64(count)
	for len(encoded) > 0 {
		n, at := min(len(encoded), settledChunk), len(b.buf)
		b.buf = append(b.buf, encoded[:n]...)
		b.crc = crc32.Update(b.crc, castagnoli, b.buf[at:])
		encoded = encoded[n:]
	}
	return nil
}

// Finish completes the object and returns it with its header. The
// builder must not be used after.
func (b *SettledBuilder) Finish() ([]byte, SettledHeader, error) {
	if b.count == 0 {
		return nil, b.h, fmt.Errorf("settled object from seq %d: no records: %w", b.h.FirstSeq, ErrMalformed)
	}
	h := b.h
	h.LastSeq = h.FirstSeq + b.count - 1
	rl := b.Len()
	h.SegLen = uint32(SegmentSize(rl))
	appendSettledHeader(b.buf[:0], h)
	seg := b.buf[SettledHeaderSize:]
	copy(seg[0:16], h.Stream[:])
	binary.BigEndian.PutUint64(seg[16:24], h.FirstSeq)
	binary.BigEndian.PutUint32(seg[24:28], uint32(b.count))
	binary.BigEndian.PutUint32(seg[28:32], uint32(rl))
	b.buf = binary.BigEndian.AppendUint32(b.buf, CRCCombine(CRC(seg[:segmentHeader]), b.crc, rl))
	return b.buf, h, nil
}

// ParseSettledHeader decodes and checks the first 64 bytes of a settled object.
func ParseSettledHeader(b []byte) (SettledHeader, error) {
	if len(b) < SettledHeaderSize {
		return SettledHeader{}, fmt.Errorf("settled header: %d bytes: %w", len(b), ErrTruncated)
	}
	if string(b[0:4]) != settledMagic {
		return SettledHeader{}, fmt.Errorf("settled header: magic %q: %w", b[0:4], ErrMagic)
	}
	if v := binary.BigEndian.Uint16(b[4:6]); v != Version {
		return SettledHeader{}, fmt.Errorf("settled header: version %d: %w", v, ErrVersion)
	}
	if got, want := CRC(b[0:60]), binary.BigEndian.Uint32(b[60:64]); got != want {
		return SettledHeader{}, fmt.Errorf("settled header: crc %08x, stored %08x: %w", got, want, ErrCRC)
	}
	if Kind(b[6]) != KindSettled {
		return SettledHeader{}, fmt.Errorf("settled header: kind %d: %w", b[6], ErrKind)
	}
	if b[7] != 0 {
		return SettledHeader{}, fmt.Errorf("settled header: reserved byte %d: %w", b[7], ErrMalformed)
	}
	var h SettledHeader
	copy(h.Stream[:], b[8:24])
	h.FirstSeq = binary.BigEndian.Uint64(b[24:32])
	h.LastSeq = binary.BigEndian.Uint64(b[32:40])
	h.FirstTsMs = int64(binary.BigEndian.Uint64(b[40:48]))
	h.LastTsMs = int64(binary.BigEndian.Uint64(b[48:56]))
	h.SegLen = binary.BigEndian.Uint32(b[56:60])
	if h.LastSeq < h.FirstSeq || h.LastSeq-h.FirstSeq >= 1<<32-1 || h.SegLen < segmentOverhead {
		return SettledHeader{}, fmt.Errorf("settled header: seqs %d..%d, segment %d bytes: %w", h.FirstSeq, h.LastSeq, h.SegLen, ErrMalformed)
	}
	return h, nil
}

// ParseSettled checks a whole settled object and decodes its records.
func ParseSettled(obj []byte) (SettledHeader, []Record, error) {
	h, err := ParseSettledHeader(obj)
	if err != nil {
		return h, nil, err
	}
	if uint64(len(obj)) != SettledHeaderSize+uint64(h.SegLen) {
		return h, nil, fmt.Errorf("settled object: %d bytes, header says %d: %w", len(obj), SettledHeaderSize+uint64(h.SegLen), ErrTruncated)
	}
	info, recs, err := DecodeSegment(obj[SettledHeaderSize:])
	if err != nil {
		return h, nil, fmt.Errorf("settled object: %w", err)
	}
	if info.Stream != h.Stream || info.FirstSeq != h.FirstSeq || uint64(info.Count) != h.LastSeq-h.FirstSeq+1 {
		return h, nil, fmt.Errorf("settled object: segment disagrees with header: %w", ErrMalformed)
	}
	return h, recs, nil
}
