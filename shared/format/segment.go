package format

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
)

// StreamID is a stream's random, immutable 16-byte id.
type StreamID [16]byte

// String is the id as 32 lowercase hex digits (its form in the metastore).
func (id StreamID) String() string { return hex.EncodeToString(id[:]) }

// ParseStreamID parses 32 hex digits.
func ParseStreamID(s string) (StreamID, error) {
	var id StreamID
	if len(s) != 32 {
		return id, fmt.Errorf("stream id %q: want 32 hex digits: %w", s, ErrMalformed)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("stream id %q: %w", s, ErrMalformed)
	}
	return id, nil
}

const (
	segmentHeader   = 32
	segmentOverhead = segmentHeader + 4
)

// SegmentInfo describes one segment.
type SegmentInfo struct {
	Stream   StreamID
	FirstSeq uint64
	Count    uint32
}

// MaxSegmentRecords is the most record bytes one segment holds: its length
// field (and a settled header's segment length) is 32-bit.
const MaxSegmentRecords = math.MaxUint32 - segmentOverhead

// SegmentSize is the encoded size of a segment holding recordsLen bytes of records.
func SegmentSize(recordsLen int) int { return segmentOverhead + recordsLen }

// AppendSegment appends a segment of count records (already encoded, back to
// back, in chunks) to b. More than MaxSegmentRecords bytes is ErrTooLong
// (b unchanged).
func AppendSegment(b []byte, info SegmentInfo, chunks ...[]byte) ([]byte, error) {
	start := len(b)
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	if uint64(n) > MaxSegmentRecords {
		return b, fmt.Errorf("segment of %d record bytes (at most %d): %w", n, uint64(MaxSegmentRecords), ErrTooLong)
	}
	b = append(b, info.Stream[:]...)
	b = binary.BigEndian.AppendUint64(b, info.FirstSeq)
	b = binary.BigEndian.AppendUint32(b, info.Count)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for _, c := range chunks {
		b = append(b, c...)
	}
	return binary.BigEndian.AppendUint32(b, CRC(b[start:])), nil
}

// ParseSegment checks a whole segment (its CRC and its length) and returns
// its header and its records bytes (aliasing b).
func ParseSegment(b []byte) (SegmentInfo, []byte, error) {
	if len(b) < segmentOverhead {
		return SegmentInfo{}, nil, fmt.Errorf("segment: %d bytes: %w", len(b), ErrTruncated)
	}
	var info SegmentInfo
	copy(info.Stream[:], b[0:16])
	info.FirstSeq = binary.BigEndian.Uint64(b[16:24])
	info.Count = binary.BigEndian.Uint32(b[24:28])
	rl := uint64(binary.BigEndian.Uint32(b[28:32]))
	if uint64(len(b)) != segmentOverhead+rl {
		return SegmentInfo{}, nil, fmt.Errorf("segment: records length %d in %d bytes: %w", rl, len(b), ErrTruncated)
	}
	end := segmentHeader + int(rl)
	if got, want := CRC(b[:end]), binary.BigEndian.Uint32(b[end:]); got != want {
		return SegmentInfo{}, nil, fmt.Errorf("segment of stream %s at seq %d: crc %08x, stored %08x: %w", info.Stream, info.FirstSeq, got, want, ErrCRC)
	}
	if info.Count == 0 || uint64(info.Count)*(recordFixed) > rl {
		return SegmentInfo{}, nil, fmt.Errorf("segment: %d records in %d bytes: %w", info.Count, rl, ErrMalformed)
	}
	return info, b[segmentHeader:end], nil
}

// DecodeSegment checks a segment and decodes all its records.
func DecodeSegment(b []byte) (SegmentInfo, []Record, error) {
	info, recs, err := ParseSegment(b)
	if err != nil {
		return info, nil, err
	}
	out, err := DecodeRecords(recs, int(info.Count))
	if err != nil {
		return info, nil, fmt.Errorf("segment of stream %s at seq %d: %w", info.Stream, info.FirstSeq, err)
	}
	return info, out, nil
}
