package metastore

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// ProducerMark is one idempotent producer batch a ref remembers (exactly-
// once appends, ADR 0041): the producer's id and batch sequence, and the
// batch's seqs, which lie inside the ref. A successor star rebuilds a
// stream's dedupe table from the marks of its last refs.
type ProducerMark struct {
	Producer [16]byte
	BatchSeq uint64
	FirstSeq uint64
	LastSeq  uint64
}

// Bounds on a ref's marks. A ref keeps at most MaxMarksPerProducer marks
// per producer (its latest batches: the star's dedupe window) and at most
// MaxRefProducerMarks in all (the latest, by seq), so a ref item stays far
// below DynamoDB's 400 KB item limit: ProducerMarkSize bytes each, 40 KiB
// at most.
const (
	MaxMarksPerProducer = 8
	MaxRefProducerMarks = 1024
	ProducerMarkSize    = 40
)

// EncodeProducerMarks is the marks' compact binary form (DynamoDB stores
// it as one B attribute): ProducerMarkSize bytes each, big-endian:
// producer id 16, batch seq 8, first seq 8, last seq 8.
func EncodeProducerMarks(ms []ProducerMark) []byte {
	b := make([]byte, 0, len(ms)*ProducerMarkSize)
	for _, m := range ms {
		b = append(b, m.Producer[:]...)
		b = binary.BigEndian.AppendUint64(b, m.BatchSeq)
		b = binary.BigEndian.AppendUint64(b, m.FirstSeq)
		b = binary.BigEndian.AppendUint64(b, m.LastSeq)
	}
	return b
}

// DecodeProducerMarks decodes EncodeProducerMarks' form; nil for empty.
func DecodeProducerMarks(b []byte) ([]ProducerMark, error) {
	if len(b)%ProducerMarkSize != 0 || len(b)/ProducerMarkSize > MaxRefProducerMarks {
		return nil, fmt.Errorf("%w: producer marks: %d bytes (want a multiple of %d, at most %d marks)", ErrInvalid, len(b), ProducerMarkSize, MaxRefProducerMarks)
	}
	var out []ProducerMark
	for p := b; len(p) > 0; p = p[ProducerMarkSize:] {
		var m ProducerMark
		copy(m.Producer[:], p[0:16])
		m.BatchSeq = binary.BigEndian.Uint64(p[16:24])
		m.FirstSeq = binary.BigEndian.Uint64(p[24:32])
		m.LastSeq = binary.BigEndian.Uint64(p[32:40])
		out = append(out, m)
	}
	return out, nil
}

// validateMarks checks a ref's marks: at most MaxRefProducerMarks, each
// with a producer and seqs inside the ref.
func validateMarks(r Ref) error {
	if len(r.Producers) > MaxRefProducerMarks {
		return fmt.Errorf("%w: ref %s@%d: %d producer marks, at most %d", ErrInvalid, r.StreamID, r.FirstSeq, len(r.Producers), MaxRefProducerMarks)
	}
	for i, m := range r.Producers {
		if m.Producer == [16]byte{} || m.FirstSeq > m.LastSeq || m.FirstSeq < r.FirstSeq || m.LastSeq > r.LastSeq {
			return fmt.Errorf("%w: ref %s@%d-%d: producer mark %d (%d-%d) is empty or outside the ref", ErrInvalid, r.StreamID, r.FirstSeq, r.LastSeq, i, m.FirstSeq, m.LastSeq)
		}
	}
	return nil
}

// TrimMarks keeps, of marks in seq order, each producer's latest
// MaxMarksPerProducer and then the latest MaxRefProducerMarks in all, in
// seq order. The absorb and settle use it to bound a ref's marks.
func TrimMarks(marks []ProducerMark) []ProducerMark {
	per := map[[16]byte]int{}
	var keep []ProducerMark
	for i := len(marks) - 1; i >= 0 && len(keep) < MaxRefProducerMarks; i-- {
		m := marks[i]
		if per[m.Producer] >= MaxMarksPerProducer {
			continue
		}
		per[m.Producer]++
		keep = append(keep, m)
	}
	slices.Reverse(keep)
	return keep
}
