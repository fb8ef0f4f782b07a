package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/format"
)

// rawBatch encodes recs as one v2 batch with the given attributes and
// records bytes (already compressed when attrs say so).
func rawBatch(attrs int16, n int, records []byte, pid int64, seq int32) []byte {
	rb := kmsg.RecordBatch{Magic: 2, Attributes: attrs, LastOffsetDelta: int32(n - 1), FirstTimestamp: 1000, MaxTimestamp: 1000,
		ProducerID: pid, ProducerEpoch: 0, FirstSequence: seq, NumRecords: int32(n), Records: records}
	rb.Length = int32(batchHeaderLen - 12 + len(records))
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
	return b
}

func encodeRecords(recs []Record) []byte {
	var out []byte
	for i, r := range recs {
		k := kmsg.Record{TimestampDelta64: r.Timestamp - 1000, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			k.Headers = append(k.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		enc := k.AppendTo(nil)[1:]
		out = binary.AppendVarint(out, int64(len(enc)))
		out = append(out, enc...)
	}
	return out
}

func sampleRecords() []Record {
	return []Record{
		{Key: []byte("k"), Value: []byte("v"), Timestamp: 1000, Headers: []RecordHeader{{Key: "a", Value: []byte("b")}, {Key: "", Value: nil}}},
		{Key: nil, Value: nil, Timestamp: 900},
		{Key: []byte{}, Value: []byte{}, Timestamp: -1},
	}
}

// TestFrameRoundTrip: a record through toStrand and fromStrand is itself,
// nulls, empties and the producer's timestamp included, whatever strand
// timestamp it was stored with; a record without a frame reads with a
// null key and its strand timestamp.
func TestFrameRoundTrip(t *testing.T) {
	for i, r := range sampleRecords() {
		s := r.toStrand(max(r.Timestamp, 0))
		got := fromStrand(5555, s.Headers, s.Body)
		if !sameRec(got, r) {
			t.Errorf("record %d: %+v came back as %+v", i, r, got)
		}
	}
	plain := fromStrand(42, []format.Header{{Name: []byte("x"), Value: []byte("y")}}, []byte("body"))
	if plain.Key != nil || plain.Timestamp != 42 || string(plain.Value) != "body" || len(plain.Headers) != 1 || plain.Headers[0].Key != "x" {
		t.Errorf("a strand API record read as %+v", plain)
	}
	// A first header named like the frame but not decoding stays a header.
	odd := fromStrand(1, []format.Header{{Name: []byte(FrameHeader), Value: []byte("junk")}}, []byte("b"))
	if odd.Key != nil || len(odd.Headers) != 1 || odd.Headers[0].Key != FrameHeader {
		t.Errorf("a record with a malformed frame read as %+v", odd)
	}
}

func sameRec(a, b Record) bool {
	eq := func(x, y []byte) bool { return bytes.Equal(x, y) && (x == nil) == (y == nil) }
	if !eq(a.Key, b.Key) || !eq(a.Value, b.Value) || a.Timestamp != b.Timestamp || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !eq(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// TestDecodeBatchesRefuses: each malformed or oversized record set fails
// with its sentinel.
func TestDecodeBatchesRefuses(t *testing.T) {
	good := rawBatch(0, 3, encodeRecords(sampleRecords()), -1, -1)
	if bs, err := DecodeBatches(good, Limits{}); err != nil || len(bs) != 1 || len(bs[0].Records) != 3 || !sameRec(bs[0].Records[0], sampleRecords()[0]) {
		t.Fatalf("good batch: %+v %v", bs, err)
	}
	badCRC := append([]byte{}, good...)
	badCRC[len(badCRC)-1] ^= 1
	txn := rawBatch(attrTransactional, 3, encodeRecords(sampleRecords()), 7, 0)
	wrongCount := rawBatch(0, 4, encodeRecords(sampleRecords()), -1, -1)
	big := rawBatch(0, 3, encodeRecords(sampleRecords()), -1, -1)
	for _, tc := range []struct {
		name string
		set  []byte
		lim  Limits
		want error
	}{
		{"empty", nil, Limits{}, ErrBatch},
		{"short", good[:40], Limits{}, ErrBatch},
		{"crc", badCRC, Limits{}, ErrBatch},
		{"transactional", txn, Limits{}, ErrTransactional},
		{"count", wrongCount, Limits{}, ErrBatch},
		{"records", big, Limits{MaxBatchRecords: 2}, ErrBatchTooLarge},
		{"bytes", big, Limits{MaxDecompressedBytes: 10}, ErrBatchTooLarge},
		{"codec", rawBatch(5, 3, encodeRecords(sampleRecords()), -1, -1), Limits{}, ErrDecompress},
		{"gzip junk", rawBatch(int16(codecGzip), 3, []byte("not gzip"), -1, -1), Limits{}, ErrDecompress},
	} {
		if _, err := DecodeBatches(tc.set, tc.lim); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestDecompressBounded: a zip bomb of each codec fails at the bound
// rather than allocating its claimed size.
func TestDecompressBounded(t *testing.T) {
	zeros := make([]byte, 1<<20)
	for _, c := range []codec{codecGzip, codecSnappy, codecLZ4, codecZstd} {
		comp := compressFor(t, c, zeros)
		if out, err := decompress(c, comp, 1<<20); err != nil || len(out) != 1<<20 {
			t.Errorf("codec %d: %d bytes, %v; want 1 MiB", c, len(out), err)
		}
		if _, err := decompress(c, comp, 1<<19); !errors.Is(err, ErrBatchTooLarge) {
			t.Errorf("codec %d past the bound: %v, want ErrBatchTooLarge", c, err)
		}
	}
}

// FuzzDecodeBatches: any record set decodes or fails with a package
// sentinel, within the limits, without panicking.
func FuzzDecodeBatches(f *testing.F) {
	f.Add(rawBatch(0, 3, encodeRecords(sampleRecords()), -1, -1))
	f.Add(rawBatch(int16(codecSnappy), 1, []byte{5, 0}, 1, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		bs, err := DecodeBatches(b, Limits{MaxDecompressedBytes: 1 << 16, MaxBatchRecords: 100})
		if err != nil {
			if !errors.Is(err, ErrBatch) && !errors.Is(err, ErrBatchTooLarge) && !errors.Is(err, ErrDecompress) && !errors.Is(err, ErrTransactional) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		n := 0
		for _, b := range bs {
			n += len(b.Records)
		}
		if n == 0 || n > 100 {
			t.Fatalf("%d records decoded", n)
		}
	})
}

// FuzzFrame: any header value decodes as a frame or not, and a record
// that round-trips through toStrand comes back equal.
func FuzzFrame(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), int64(5), "h", []byte("x"), false, []byte{1, 0, 2, 0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte, ts int64, hk string, hv []byte, nullKey bool, raw []byte) {
		_, _ = decodeFrame(raw, 3)
		_ = fromStrand(1, []format.Header{{Name: []byte(FrameHeader), Value: raw}, {Name: []byte("a")}}, value)
		r := Record{Key: key, Value: value, Timestamp: ts, Headers: []RecordHeader{{Key: hk, Value: hv}}}
		if nullKey {
			r.Key = nil
		} else if r.Key == nil {
			r.Key = []byte{}
		}
		if r.Value == nil {
			r.Value = []byte{}
		}
		s := r.toStrand(0)
		if got := fromStrand(0, s.Headers, s.Body); !sameRec(got, r) {
			t.Fatalf("%+v came back as %+v", r, got)
		}
	})
}

// FuzzParseRequest: any frame parses into a request or fails with
// ErrRequest.
func FuzzParseRequest(f *testing.F) {
	for _, k := range []kmsg.Request{kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest(), kmsg.NewPtrJoinGroupRequest()} {
		k.SetVersion(versions[k.Key()].max)
		b := binary.BigEndian.AppendUint16(nil, uint16(k.Key()))
		b = binary.BigEndian.AppendUint16(b, uint16(k.GetVersion()))
		b = append(b, 0, 0, 0, 1, 0, 1, 'c')
		if k.IsFlexible() {
			b = append(b, 0)
		}
		f.Add(k.AppendTo(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			if !errors.Is(err, ErrRequest) {
				t.Fatalf("error without ErrRequest: %v", err)
			}
			return
		}
		if _, ok := versions[r.kreq.Key()]; !ok {
			t.Fatalf("parsed key %d, which is not served", r.kreq.Key())
		}
	})
}

// FuzzParsePlain: a SASL/PLAIN message splits into a non-empty user and
// password or fails with ErrSASL.
func FuzzParsePlain(f *testing.F) {
	f.Add([]byte("\x00user\x00strand_token"))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, p, err := ParsePlain(b)
		if err != nil {
			if !errors.Is(err, ErrSASL) {
				t.Fatal(err)
			}
			return
		}
		if u == "" || p == "" || bytes.Count(b, []byte{0}) != 2 {
			t.Fatalf("%q parsed as %q, %q", b, u, p)
		}
	})
}

// FuzzDecodeCommit: a commit record decodes with a group and valid
// offsets, or fails with ErrCommit.
func FuzzDecodeCommit(f *testing.F) {
	f.Add([]byte(`{"g":"g","o":[{"t":"t","p":0,"n":5,"e":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommit(b)
		if err != nil {
			if !errors.Is(err, ErrCommit) {
				t.Fatal(err)
			}
			return
		}
		if c.Group == "" {
			t.Fatal("no group")
		}
		for _, o := range c.Offsets {
			if o.Offset < -1 || o.Partition < 0 || ValidTopic(o.Topic) != nil {
				t.Fatalf("accepted %+v", o)
			}
		}
	})
}
