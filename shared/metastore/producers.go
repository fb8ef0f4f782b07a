package metastore

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/strandlog/strand/shared/format"
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
// with a producer and seqs inside the ref; and its carried table
// (validateCarried).
func validateMarks(r Ref) error {
	if err := validateCarried(r); err != nil {
		return err
	}
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

// validateCarried checks a ref's carried table: what the flight's parser
// checks (format.CheckCarried: at most MaxRefProducerMarks, each with a
// producer, in seq order without overlap, at most MaxMarksPerProducer of
// one producer), each mark below CarriedBelow, which is at most one past
// the ref's last seq.
func validateCarried(r Ref) error {
	if len(r.Carried) == 0 {
		if r.CarriedBelow != 0 {
			return fmt.Errorf("%w: ref %s@%d: carried tail %d without a carried table", ErrInvalid, r.StreamID, r.FirstSeq, r.CarriedBelow)
		}
		return nil
	}
	if r.LastSeq == ^uint64(0) || r.CarriedBelow > r.LastSeq+1 {
		return fmt.Errorf("%w: ref %s@%d-%d: carried tail %d past the ref", ErrInvalid, r.StreamID, r.FirstSeq, r.LastSeq, r.CarriedBelow)
	}
	if err := format.CheckCarried(PassMarks(r.Carried), r.CarriedBelow); err != nil {
		return fmt.Errorf("%w: ref %s@%d-%d: %v", ErrInvalid, r.StreamID, r.FirstSeq, r.LastSeq, err)
	}
	return nil
}

// PassMarks converts producer marks to the format's form.
func PassMarks(ms []ProducerMark) []format.PassMark {
	if len(ms) == 0 {
		return nil
	}
	out := make([]format.PassMark, len(ms))
	for i, m := range ms {
		out[i] = format.PassMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq}
	}
	return out
}

// FromPassMarks converts the format's marks to producer marks (nil for
// none).
func FromPassMarks(ms []format.PassMark) []ProducerMark {
	if len(ms) == 0 {
		return nil
	}
	out := make([]ProducerMark, len(ms))
	for i, m := range ms {
		out[i] = ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq}
	}
	return out
}

// UnionMarks is the union of mark lists by (producer, batch seq), in seq
// order: a batch named in several lists (a carried table repeats what
// earlier parts' own marks and tables hold) is kept once, with the seqs of
// the latest list naming it. Unbounded: callers bound it with TrimMarks.
func UnionMarks(lists ...[]ProducerMark) []ProducerMark {
	type key struct {
		p   [16]byte
		seq uint64
	}
	at := map[key]int{}
	var out []ProducerMark
	for _, l := range lists {
		for _, m := range l {
			k := key{m.Producer, m.BatchSeq}
			if i, ok := at[k]; ok {
				out[i] = m
				continue
			}
			at[k] = len(out)
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b ProducerMark) int { return cmp.Compare(a.FirstSeq, b.FirstSeq) })
	return out
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
