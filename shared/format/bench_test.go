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

// BenchmarkSettledBuilder renders a 4 MiB settled object from 64 segments'
// records (64 KiB each) into a reused buffer, as settle does: the copy
// with the CRC taken piece by piece in cache (SettledBuilder).
// BenchmarkAppendSettled is the same object as a copy and then a second
// pass over it for the CRC (the builder's way before issue 36's last
// change).
func BenchmarkSettledBuilder(b *testing.B) {
	chunks, n, buf := settledBenchSetup(b)
	for b.Loop() {
		sb := NewSettledBuilderIn(buf, sid(1), 0, n)
		for _, c := range chunks {
			if err := sb.Add(c, 64, 0, 0); err != nil {
				b.Fatal(err)
			}
		}
		if _, _, err := sb.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendSettled(b *testing.B) {
	chunks, _, buf := settledBenchSetup(b)
	for b.Loop() {
		if _, err := AppendSettled(buf[:0], SettledHeader{Stream: sid(1), LastSeq: 64*64 - 1}, chunks...); err != nil {
			b.Fatal(err)
		}
	}
}

// settledBenchSetup: 64 chunks of 64 records of 1 KiB, each chunk its
// own memory (as segments read from different slots are), their record
// bytes, and a buffer for the object; it sets b's bytes per op.
func settledBenchSetup(b *testing.B) ([][]byte, int, []byte) {
	var chunks [][]byte
	for range 64 {
		var c []byte
		for range 64 {
			c = AppendRecord(c, Record{Body: make([]byte, 1024-14)})
		}
		chunks = append(chunks, c)
	}
	n := len(chunks) * len(chunks[0])
	b.SetBytes(int64(n))
	return chunks, n, make([]byte, 0, SettledBufferSize(n))
}
