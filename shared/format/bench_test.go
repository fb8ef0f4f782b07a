package format

import (
	"testing"
)

func benchRecords(n, size int) []Record {
	rs := make([]Record, n)
	for i := range rs {
		rs[i] = Record{TimestampMs: int64(1700000000000 + i), Body: make([]byte, size-recordFixed)}
	}
	return rs
}

// BenchmarkAppendRecord encodes 1 KiB records into a reused buffer.
func BenchmarkAppendRecord(b *testing.B) {
	r := benchRecords(1, 1024)[0]
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(EncodedSize(r)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendRecord(buf[:0], r)
	}
}

// BenchmarkValidateBatch checks a batch of 64 records of 1 KiB.
func BenchmarkValidateBatch(b *testing.B) {
	rs := benchRecords(64, 1024)
	b.SetBytes(64 * 1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateBatch(rs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCRC is CRC-32C (Castagnoli) over 1 MiB, the checksum of a
// flight-sized segment.
func BenchmarkCRC(b *testing.B) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		CRC(buf)
	}
}

// BenchmarkBuilder renders a 1 MiB flight (16 streams, 64 records of 1 KiB
// each) into a reused Builder: the bundle encode. Steady state allocates
// nothing.
func BenchmarkBuilder(b *testing.B) {
	var enc []byte
	rs := benchRecords(64, 1024)
	for _, r := range rs {
		enc = AppendRecord(enc, r)
	}
	bld := NewBuilder()
	b.SetBytes(int64(16 * len(enc)))
	b.ReportAllocs()
	var n Nonce
	slot := uint64(0)
	for b.Loop() {
		bld.Reset(1, slot, n)
		for s := 0; s < 16; s++ {
			var id StreamID
			id[15] = byte(s)
			bld.BeginSegment(id, slot*64)
			bld.AddRecords(enc, 64, rs[0].TimestampMs, rs[63].TimestampMs)
			bld.EndSegment()
		}
		if obj := bld.Finish(); len(obj) < 16*len(enc) {
			b.Fatal("short flight")
		}
		slot++
	}
}

// BenchmarkParseEnvelope classifies a slot from its first 60 bytes (what a
// fence or the absorb's walk does per slot).
func BenchmarkParseEnvelope(b *testing.B) {
	bld := NewBuilder()
	bld.Reset(1, 2, Nonce{})
	obj := bld.Finish()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseEnvelope(obj[:EnvelopeSize]); err != nil {
			b.Fatal(err)
		}
	}
}
