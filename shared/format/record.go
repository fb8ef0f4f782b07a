package format

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Record and batch limits. A record's size, as users count it and as every
// limit states it, is its metered size (MeteredSize): the body plus every
// header's name and value, no encoding overhead.
const (
	// MaxRecordBytes bounds one record's metered size: a record with no
	// headers may have a body of exactly 1 MiB.
	MaxRecordBytes = 1 << 20
	// MaxBatchRecords bounds the records of a batch.
	MaxBatchRecords = 1000
	// MaxBatchMeteredBytes bounds the sum of a batch's metered sizes.
	MaxBatchMeteredBytes = 1 << 20
	// MaxBatchHeaders bounds the headers of a batch, all records together.
	MaxBatchHeaders = math.MaxUint16
	// MaxBatchBytes bounds a batch's encoded records. It follows from the
	// limits above (it is never the one a valid batch meets): the
	// metered bytes, plus each record's and each header's fixed fields.
	MaxBatchBytes = MaxBatchMeteredBytes + MaxBatchRecords*recordFixed + MaxBatchHeaders*headerFixed

	recordFixed = 4 + 8 + 2
	headerFixed = 2 + 4
)

// MeteredSize is r's size as the limits count it: len(Body) plus, for
// every header, len(Name) + len(Value).
func MeteredSize(r Record) int {
	n := len(r.Body)
	for _, h := range r.Headers {
		n += len(h.Name) + len(h.Value)
	}
	return n
}

// Header is one record header: a name and a value, both bytes.
type Header struct {
	Name  []byte
	Value []byte
}

// Record is one record's content. Its seq number is positional: a segment
// states its first seq and records follow contiguously.
type Record struct {
	TimestampMs int64
	Headers     []Header
	Body        []byte
}

// EncodedSize is the number of bytes AppendRecord adds for r.
func EncodedSize(r Record) int {
	n := recordFixed + len(r.Body)
	for _, h := range r.Headers {
		n += headerFixed + len(h.Name) + len(h.Value)
	}
	return n
}

// ValidateRecord checks one record against the format's limits.
func ValidateRecord(r Record) error {
	if len(r.Headers) > math.MaxUint16 {
		return fmt.Errorf("%d headers (at most %d): %w", len(r.Headers), math.MaxUint16, ErrRecordInvalid)
	}
	for i, h := range r.Headers {
		if len(h.Name) == 0 {
			return fmt.Errorf("header %d has an empty name: %w", i, ErrRecordInvalid)
		}
		if len(h.Name) > math.MaxUint16 {
			return fmt.Errorf("header %d name is %d bytes (at most %d): %w", i, len(h.Name), math.MaxUint16, ErrRecordInvalid)
		}
	}
	if m := MeteredSize(r); m > MaxRecordBytes {
		return fmt.Errorf("record is %d bytes, body plus header names and values (at most %d): %w", m, MaxRecordBytes, ErrRecordInvalid)
	}
	return nil
}

// ValidateBatch checks a batch: 1..MaxBatchRecords valid records of at
// most MaxBatchMeteredBytes metered and MaxBatchHeaders headers in all. It
// returns the encoded size (at most MaxBatchBytes).
func ValidateBatch(recs []Record) (int, error) {
	if len(recs) == 0 {
		return 0, ErrEmptyBatch
	}
	if len(recs) > MaxBatchRecords {
		return 0, fmt.Errorf("%d records (at most %d): %w", len(recs), MaxBatchRecords, ErrBatchTooLarge)
	}
	total, metered, headers := 0, 0, 0
	for i, r := range recs {
		if err := ValidateRecord(r); err != nil {
			return 0, fmt.Errorf("record %d: %w", i, err)
		}
		total += EncodedSize(r)
		metered += MeteredSize(r)
		headers += len(r.Headers)
	}
	if metered > MaxBatchMeteredBytes {
		return 0, fmt.Errorf("%d bytes, bodies plus header names and values (at most %d): %w", metered, MaxBatchMeteredBytes, ErrBatchTooLarge)
	}
	if headers > MaxBatchHeaders {
		return 0, fmt.Errorf("%d headers (at most %d in a batch): %w", headers, MaxBatchHeaders, ErrBatchTooLarge)
	}
	if total > MaxBatchBytes { // implied by the limits above
		return 0, fmt.Errorf("%d bytes encoded (at most %d): %w", total, MaxBatchBytes, ErrBatchTooLarge)
	}
	return total, nil
}

// AppendRecord appends r's encoding to b. r must be valid (ValidateRecord).
func AppendRecord(b []byte, r Record) []byte {
	n := EncodedSize(r)
	b = binary.BigEndian.AppendUint32(b, uint32(n-4))
	b = binary.BigEndian.AppendUint64(b, uint64(r.TimestampMs))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Headers)))
	for _, h := range r.Headers {
		b = binary.BigEndian.AppendUint16(b, uint16(len(h.Name)))
		b = append(b, h.Name...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(h.Value)))
		b = append(b, h.Value...)
	}
	return append(b, r.Body...)
}

// RecordReader iterates over encoded records. The records it returns alias
// the input bytes.
type RecordReader struct {
	b   []byte
	off int
	err error
}

// NewRecordReader reads the records encoded back to back in b.
func NewRecordReader(b []byte) *RecordReader { return &RecordReader{b: b} }

// Next decodes the next record. It returns false at the end of the input or
// on an error (see Err).
func (rr *RecordReader) Next(r *Record) bool {
	if rr.err != nil || rr.off >= len(rr.b) {
		return false
	}
	rec, n, err := decodeRecord(rr.b[rr.off:], r.Headers[:0])
	if err != nil {
		rr.err = fmt.Errorf("record at byte %d: %w", rr.off, err)
		return false
	}
	*r = rec
	rr.off += n
	return true
}

// Err is the first decoding error, if any.
func (rr *RecordReader) Err() error { return rr.err }

// DecodeRecords decodes all records in b, which must hold exactly count.
func DecodeRecords(b []byte, count int) ([]Record, error) {
	out := make([]Record, 0, max(0, min(count, len(b)/recordFixed+1)))
	rr := NewRecordReader(b)
	var r Record
	for rr.Next(&r) {
		out = append(out, r)
		r = Record{}
	}
	if rr.Err() != nil {
		return nil, rr.Err()
	}
	if len(out) != count {
		return nil, fmt.Errorf("%d records, header says %d: %w", len(out), count, ErrMalformed)
	}
	return out, nil
}

// RecordTimestamp returns the timestamp of the encoded record at the start
// of b without decoding the rest.
func RecordTimestamp(b []byte) int64 { return int64(binary.BigEndian.Uint64(b[4:12])) }

func decodeRecord(b []byte, hdrs []Header) (Record, int, error) {
	if len(b) < recordFixed {
		return Record{}, 0, fmt.Errorf("%d bytes left: %w", len(b), ErrTruncated)
	}
	l := int(binary.BigEndian.Uint32(b[0:4]))
	if l < recordFixed-4 || l > len(b)-4 {
		return Record{}, 0, fmt.Errorf("length %d with %d bytes left: %w", l, len(b)-4, ErrTruncated)
	}
	body := b[4 : 4+l]
	r := Record{TimestampMs: int64(binary.BigEndian.Uint64(body[0:8]))}
	nh := int(binary.BigEndian.Uint16(body[8:10]))
	p := 10
	for i := 0; i < nh; i++ {
		if len(body)-p < 2 {
			return Record{}, 0, fmt.Errorf("header %d name length: %w", i, ErrMalformed)
		}
		nl := int(binary.BigEndian.Uint16(body[p:]))
		p += 2
		if len(body)-p < nl+4 {
			return Record{}, 0, fmt.Errorf("header %d name: %w", i, ErrMalformed)
		}
		name := body[p : p+nl : p+nl]
		p += nl
		vl := int(binary.BigEndian.Uint32(body[p:]))
		p += 4
		if vl < 0 || len(body)-p < vl {
			return Record{}, 0, fmt.Errorf("header %d value: %w", i, ErrMalformed)
		}
		hdrs = append(hdrs, Header{Name: name, Value: body[p : p+vl : p+vl]})
		p += vl
	}
	if nh > 0 {
		r.Headers = hdrs
	}
	r.Body = body[p:len(body):len(body)]
	return r, 4 + l, nil
}
