package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record batch errors (Kafka's CORRUPT_MESSAGE or INVALID_RECORD).
var (
	// ErrBatch: a record batch that does not decode (bad length, magic,
	// CRC or record encoding).
	ErrBatch = errors.New("kafka: malformed record batch")
	// ErrBatchTooLarge: a batch past the limits (records, or bytes once
	// decompressed).
	ErrBatchTooLarge = errors.New("kafka: record batch too large")
	// ErrTransactional: a transactional or control batch; the front end
	// has no transactions.
	ErrTransactional = errors.New("kafka: transactions are not supported")
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Batch attributes (Kafka's record batch v2). Wire format.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// batchHeaderLen is a v2 record batch's fixed header, up to its records.
const batchHeaderLen = 61

// Batch is one decoded produce batch.
type Batch struct {
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Records       []Record
}

// Idempotent reports whether the batch carries a producer id.
func (b Batch) Idempotent() bool { return b.ProducerID >= 0 }

// DecodeBatches decodes a produce partition's record set: one or more
// v2 record batches back to back. lim bounds the records and the bytes
// once decompressed, over all batches; it is checked before each
// allocation, so a hostile set costs at most the bounds.
func DecodeBatches(set []byte, lim Limits) ([]Batch, error) {
	lim = lim.WithDefaults()
	var out []Batch
	records, bytes := 0, 0
	for len(set) > 0 {
		if len(set) < batchHeaderLen {
			return nil, fmt.Errorf("%w: %d bytes left, shorter than a batch header", ErrBatch, len(set))
		}
		length := int64(int32(binary.BigEndian.Uint32(set[8:12])))
		if length < batchHeaderLen-12 || length > int64(len(set)-12) {
			return nil, fmt.Errorf("%w: length %d with %d bytes", ErrBatch, length, len(set)-12)
		}
		raw := set[:12+length]
		set = set[12+length:]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBatch, err)
		}
		if rb.Magic != 2 {
			return nil, fmt.Errorf("%w: magic %d (want 2: Kafka 0.11 or later)", ErrBatch, rb.Magic)
		}
		if crc32.Checksum(raw[21:], crc32c) != uint32(rb.CRC) {
			return nil, fmt.Errorf("%w: CRC mismatch", ErrBatch)
		}
		if rb.Attributes&(attrTransactional|attrControl) != 0 {
			return nil, ErrTransactional
		}
		if rb.NumRecords < 0 || rb.LastOffsetDelta < 0 || rb.NumRecords-1 != rb.LastOffsetDelta && rb.NumRecords != 0 {
			return nil, fmt.Errorf("%w: %d records, last offset delta %d", ErrBatch, rb.NumRecords, rb.LastOffsetDelta)
		}
		if rb.NumRecords == 0 {
			return nil, fmt.Errorf("%w: an empty batch", ErrBatch)
		}
		records += int(rb.NumRecords)
		if records > lim.MaxBatchRecords {
			return nil, fmt.Errorf("%w: more than %d records", ErrBatchTooLarge, lim.MaxBatchRecords)
		}
		body, err := decompress(codec(rb.Attributes&attrCodecMask), rb.Records, lim.MaxDecompressedBytes-bytes)
		if err != nil {
			return nil, err
		}
		bytes += len(body)
		recs, err := decodeRecords(body, int(rb.NumRecords), rb.FirstTimestamp)
		if err != nil {
			return nil, err
		}
		out = append(out, Batch{ProducerID: rb.ProducerID, ProducerEpoch: rb.ProducerEpoch, BaseSequence: rb.FirstSequence, Records: recs})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no batch", ErrBatch)
	}
	return out, nil
}

// decodeRecords decodes exactly n records (Kafka record v2) filling b,
// each offset delta its index. Headers are counted against the bytes
// left before anything is allocated for them.
func decodeRecords(b []byte, n int, firstTs int64) ([]Record, error) {
	if n > len(b)/7 { // a record is at least 7 bytes
		return nil, fmt.Errorf("%w: %d records in %d bytes", ErrBatch, n, len(b))
	}
	out := make([]Record, n)
	for i := range n {
		l, k := binary.Varint(b)
		if k <= 0 || l < 0 || l > int64(len(b)-k) {
			return nil, fmt.Errorf("%w: record %d length", ErrBatch, i)
		}
		r, err := decodeRecord(b[k:k+int(l)], i, firstTs)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		out[i] = r
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last record", ErrBatch, len(b))
	}
	return out, nil
}

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads varint-length bytes; -1 is null.
func (r *reader) bytes() []byte {
	l := r.varint()
	switch {
	case r.bad:
		return nil
	case l == -1:
		return nil
	case l < -1 || l > int64(len(r.b)):
		r.bad = true
		return nil
	}
	v := append([]byte{}, r.b[:l]...)
	r.b = r.b[l:]
	return v
}

func decodeRecord(b []byte, i int, firstTs int64) (Record, error) {
	r := reader{b: b}
	if len(r.b) < 1 {
		return Record{}, fmt.Errorf("%w: empty record", ErrBatch)
	}
	r.b = r.b[1:] // attributes, unused
	tsDelta := r.varint()
	off := r.varint()
	if !r.bad && off != int64(i) {
		return Record{}, fmt.Errorf("%w: offset delta %d at index %d", ErrBatch, off, i)
	}
	var rec Record
	rec.Key = r.bytes()
	rec.Value = r.bytes()
	nh := r.varint()
	if r.bad || nh < 0 || nh > int64(len(r.b))/2 { // a header is at least 2 bytes
		return Record{}, fmt.Errorf("%w: key, value or header count", ErrBatch)
	}
	if nh > 0 {
		rec.Headers = make([]RecordHeader, nh)
	}
	for j := range rec.Headers {
		k := r.bytes()
		if k == nil {
			r.bad = true
		}
		rec.Headers[j] = RecordHeader{Key: string(k), Value: r.bytes()}
	}
	if r.bad || len(r.b) != 0 {
		return Record{}, fmt.Errorf("%w: headers", ErrBatch)
	}
	if tsDelta > 0 && firstTs > math.MaxInt64-tsDelta || tsDelta < 0 && firstTs < math.MinInt64-tsDelta {
		return Record{}, fmt.Errorf("%w: timestamp overflows", ErrBatch)
	}
	rec.Timestamp = firstTs + tsDelta
	return rec, nil
}

// Fetched is one record read back, at its offset, with the strand
// timestamp (LogAppendTime topics serve that one).
type Fetched struct {
	Offset int64
	LogTs  int64
	Record
}

// EncodeBatch appends recs (at least one, offsets increasing) to dst as
// uncompressed v2 record batches: one batch, or with logAppend one per
// run of records with the same strand timestamp. logAppend serves the
// strand timestamps with the LogAppendTime attribute, and a Kafka client
// gives every record of such a batch the batch's max timestamp, ignoring
// the deltas: records stamped at different times in one batch would all
// read back with the last one's (TestLogAppendTimePerBatch). Without
// logAppend, one batch serves the producers' timestamps as deltas.
func EncodeBatch(dst []byte, recs []Fetched, logAppend bool) []byte {
	if !logAppend {
		return encodeBatch(dst, recs, false)
	}
	for len(recs) > 0 {
		n := 1
		for n < len(recs) && recs[n].LogTs == recs[0].LogTs {
			n++
		}
		dst, recs = encodeBatch(dst, recs[:n], true), recs[n:]
	}
	return dst
}

// encodeBatch appends one batch holding recs to dst (EncodeBatch).
func encodeBatch(dst []byte, recs []Fetched, logAppend bool) []byte {
	ts := func(f Fetched) int64 {
		if logAppend {
			return f.LogTs
		}
		return f.Timestamp
	}
	first, maxTs := ts(recs[0]), ts(recs[0])
	var body []byte
	for _, f := range recs {
		maxTs = max(maxTs, ts(f))
		rec := kmsg.Record{TimestampDelta64: ts(f) - first, OffsetDelta: int32(f.Offset - recs[0].Offset),
			Key: f.Key, Value: f.Value}
		for _, h := range f.Headers {
			rec.Headers = append(rec.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		enc := rec.AppendTo(nil)[1:] // drop the zero length AppendTo wrote
		body = binary.AppendVarint(body, int64(len(enc)))
		body = append(body, enc...)
	}
	var attrs int16
	if logAppend {
		attrs |= attrLogAppendTime
	}
	rb := kmsg.RecordBatch{FirstOffset: recs[0].Offset, PartitionLeaderEpoch: 0, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(recs[len(recs)-1].Offset - recs[0].Offset), FirstTimestamp: first, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: body}
	rb.Length = int32(batchHeaderLen - 12 + len(body))
	start := len(dst)
	dst = rb.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start+17:], crc32.Checksum(dst[start+21:], crc32c))
	return dst
}
