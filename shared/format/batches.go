package format

import (
	"encoding/binary"
	"fmt"
)

// ProducerID identifies one idempotent producer: 16 bytes the client
// chooses (typically random). The zero ProducerID means "no producer": the
// batch is not deduplicated and is not listed in the batch table.
type ProducerID [16]byte

// IsZero reports whether p is the zero ProducerID.
func (p ProducerID) IsZero() bool { return p == ProducerID{} }

// batchEntrySize is one batch-table entry. Frozen: part of format version 2.
const batchEntrySize = 40

// BatchEntry is one producer batch of a version-2 flight: which segment
// (footer entry index) holds it, the producer's id and batch sequence, and
// the batch's seqs.
type BatchEntry struct {
	Entry    uint32 // index of the footer entry (segment) holding the batch
	Producer ProducerID
	BatchSeq uint64
	FirstSeq uint64
	Count    uint32
}

// LastSeq is the seq of the batch's last record.
func (e BatchEntry) LastSeq() uint64 { return e.FirstSeq + uint64(e.Count) - 1 }

// AddBatch lists a producer batch of the open segment in the batch table:
// its records are the count records from firstSeq, added to the segment
// with AddRecords. A flight with any batch is written as VersionBatches.
func (b *Builder) AddBatch(p ProducerID, batchSeq, firstSeq uint64, count int) {
	if b.seg < 0 {
		panic("format: AddBatch without an open segment")
	}
	b.batches = append(b.batches, BatchEntry{Entry: uint32(len(b.entries) - 1), Producer: p, BatchSeq: batchSeq, FirstSeq: firstSeq, Count: uint32(count)})
}

// Batches are the batch-table entries so far (valid until the next Reset).
func (b *Builder) Batches() []BatchEntry { return b.batches }

func appendBatchTable(b []byte, batches []BatchEntry) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(batches)))
	for _, e := range batches {
		b = binary.BigEndian.AppendUint32(b, e.Entry)
		b = append(b, e.Producer[:]...)
		b = binary.BigEndian.AppendUint64(b, e.BatchSeq)
		b = binary.BigEndian.AppendUint64(b, e.FirstSeq)
		b = binary.BigEndian.AppendUint32(b, e.Count)
	}
	return b
}

// parseBatchTable decodes the batch table p (count and entries, nothing
// after) against the footer's entries: each batch lies inside its segment's
// seqs, batches are in (segment, seq) order and do not overlap.
// A version-3 flight's batch table may be empty (mayBeEmpty).
func parseBatchTable(p []byte, entries []FooterEntry, mayBeEmpty bool) ([]BatchEntry, error) {
	if len(p) < 4 {
		return nil, fmt.Errorf("batch table: %d bytes: %w", len(p), ErrTruncated)
	}
	n := binary.BigEndian.Uint32(p[0:4])
	if uint64(n)*batchEntrySize != uint64(len(p)-4) {
		return nil, fmt.Errorf("batch table: %d entries in %d bytes: %w", n, len(p)-4, ErrMalformed)
	}
	if n == 0 && mayBeEmpty {
		return nil, nil
	}
	if n == 0 {
		return nil, fmt.Errorf("batch table: empty in a version %d flight: %w", VersionBatches, ErrMalformed)
	}
	out := make([]BatchEntry, n)
	var prevEntry uint32
	var next uint64
	for i := range out {
		q := p[4+i*batchEntrySize:]
		e := &out[i]
		e.Entry = binary.BigEndian.Uint32(q[0:4])
		copy(e.Producer[:], q[4:20])
		e.BatchSeq = binary.BigEndian.Uint64(q[20:28])
		e.FirstSeq = binary.BigEndian.Uint64(q[28:36])
		e.Count = binary.BigEndian.Uint32(q[36:40])
		if e.Entry >= uint32(len(entries)) || e.Count == 0 || e.Producer.IsZero() {
			return nil, fmt.Errorf("batch %d: segment %d of %d, %d records: %w", i, e.Entry, len(entries), e.Count, ErrMalformed)
		}
		seg := entries[e.Entry]
		if i == 0 || e.Entry != prevEntry {
			if i > 0 && e.Entry < prevEntry {
				return nil, fmt.Errorf("batch %d: segment %d after segment %d: %w", i, e.Entry, prevEntry, ErrMalformed)
			}
			next = seg.FirstSeq
		}
		if e.FirstSeq < next || e.FirstSeq+uint64(e.Count) < e.FirstSeq || e.LastSeq() > seg.LastSeq() {
			return nil, fmt.Errorf("batch %d: seqs %d+%d outside segment %d (%d..%d) or overlapping: %w", i, e.FirstSeq, e.Count, e.Entry, seg.FirstSeq, seg.LastSeq(), ErrBounds)
		}
		prevEntry, next = e.Entry, e.LastSeq()+1
	}
	return out, nil
}
