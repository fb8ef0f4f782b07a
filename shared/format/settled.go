package format

import (
	"encoding/binary"
	"fmt"
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
// already encoded back to back in chunks.
func AppendSettled(b []byte, h SettledHeader, chunks ...[]byte) []byte {
	rl := 0
	for _, c := range chunks {
		rl += len(c)
	}
	h.SegLen = uint32(SegmentSize(rl))
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
	b = binary.BigEndian.AppendUint32(b, CRC(b[start:]))
	return AppendSegment(b, SegmentInfo{Stream: h.Stream, FirstSeq: h.FirstSeq, Count: uint32(h.LastSeq - h.FirstSeq + 1)}, chunks...)
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
