package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/")

func sid(b byte) StreamID {
	var id StreamID
	for i := range id {
		id[i] = b + byte(i)
	}
	return id
}

func nonce() Nonce {
	var n Nonce
	copy(n[:], "golden-nonce-16b")
	return n
}

func enc(recs ...Record) []byte {
	var b []byte
	for _, r := range recs {
		b = AppendRecord(b, r)
	}
	return b
}

// goldenFlight is the flight vector: epoch 3, slot 41, three streams.
func goldenFlight() []byte {
	b := NewBuilder()
	b.Reset(3, 41, nonce())
	b.BeginSegment(sid(0xa0), 0)
	b.AddRecords(enc(Record{TimestampMs: 1700000000000, Body: []byte("hello")}), 1, 1700000000000, 1700000000000)
	b.AddRecords(enc(Record{TimestampMs: 1700000000001, Headers: []Header{{Name: []byte("k"), Value: []byte("v")}}, Body: []byte("world")}), 1, 1700000000001, 1700000000001)
	b.EndSegment()
	b.BeginSegment(sid(0xb0), 17)
	b.AddRecords(enc(Record{TimestampMs: 1700000000002, Body: nil}), 1, 1700000000002, 1700000000002)
	b.EndSegment()
	b.BeginSegment(sid(0xc0), 5)
	b.AddRecords(enc(
		Record{TimestampMs: 1700000000003, Headers: []Header{{Name: []byte("content-type"), Value: []byte("text/plain")}, {Name: []byte("x"), Value: nil}}, Body: []byte("a")},
		Record{TimestampMs: 1700000000004, Body: []byte("bb")},
		Record{TimestampMs: 1700000000005, Body: []byte("ccc")},
	), 3, 1700000000003, 1700000000005)
	b.EndSegment()
	return bytes.Clone(b.Finish())
}

func goldenPoison() []byte { return Poison(3, 42, nonce()).Bytes() }

func goldenSettled() []byte {
	obj, err := AppendSettled(nil, SettledHeader{Stream: sid(0xc0), FirstSeq: 5, LastSeq: 7, FirstTsMs: 1700000000003, LastTsMs: 1700000000005},
		enc(Record{TimestampMs: 1700000000003, Body: []byte("a")}, Record{TimestampMs: 1700000000004, Body: []byte("bb")}),
		enc(Record{TimestampMs: 1700000000005, Body: []byte("ccc")}))
	if err != nil {
		panic(err)
	}
	return obj
}

// The builder renders the golden settled object byte for byte, records
// added one batch at a time.
func TestSettledBuilderMatchesAppendSettled(t *testing.T) {
	b := NewSettledBuilder(sid(0xc0), 5, 0)
	if err := b.Add(enc(Record{TimestampMs: 1700000000003, Body: []byte("a")}, Record{TimestampMs: 1700000000004, Body: []byte("bb")}), 2, 1700000000003, 1700000000004); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(enc(Record{TimestampMs: 1700000000005, Body: []byte("ccc")}), 1, 1700000000005, 1700000000005); err != nil {
		t.Fatal(err)
	}
	obj, h, err := b.Finish()
	if err != nil || !bytes.Equal(obj, goldenSettled()) || h.LastSeq != 7 || h.LastTsMs != 1700000000005 {
		t.Fatalf("builder: header %+v, %v; equal to AppendSettled: %v", h, err, bytes.Equal(obj, goldenSettled()))
	}
	if _, _, err := NewSettledBuilder(sid(1), 0, 0).Finish(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty object: %v", err)
	}
}

// A builder rendering into a reused buffer (NewSettledBuilderIn) whose
// bytes are another object's renders the golden object byte for byte, in
// that buffer's memory; one too small for the hint is not used.
func TestSettledBuilderInReusesBuffer(t *testing.T) {
	dirty := bytes.Repeat([]byte{0xa5}, SettledBufferSize(64))
	b := NewSettledBuilderIn(dirty[:7], sid(0xc0), 5, 6)
	for _, r := range []Record{{TimestampMs: 1700000000003, Body: []byte("a")}, {TimestampMs: 1700000000004, Body: []byte("bb")}, {TimestampMs: 1700000000005, Body: []byte("ccc")}} {
		if err := b.Add(enc(r), 1, r.TimestampMs, r.TimestampMs); err != nil {
			t.Fatal(err)
		}
	}
	obj, _, err := b.Finish()
	if err != nil || !bytes.Equal(obj, goldenSettled()) {
		t.Fatalf("builder in a dirty buffer: %v; equal to AppendSettled: %v", err, bytes.Equal(obj, goldenSettled()))
	}
	if &obj[0] != &dirty[0] {
		t.Fatal("the object was not rendered in the buffer given")
	}
	small := make([]byte, 0, SettledBufferSize(1))
	sb := NewSettledBuilderIn(small, sid(1), 0, 2)
	if err := sb.Add(enc(Record{Body: []byte("a")}), 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	if obj, _, err := sb.Finish(); err != nil || &small[:1][0] == &obj[0] {
		t.Fatalf("a buffer smaller than the hint was used (%v)", err)
	}
}

// Lengths and counts that 32 bits cannot hold are refused, never wrapped
// (issue 19's finding 2). No 4 GiB is allocated: the chunks share one
// buffer and the check comes before any copy.
func TestSegmentLengthsRefuseToWrap(t *testing.T) {
	chunk := make([]byte, 64<<20)
	var chunks [][]byte
	for range 64 { // 4 GiB in all
		chunks = append(chunks, chunk)
	}
	if b, err := AppendSegment([]byte("x"), SegmentInfo{Stream: sid(1), Count: 1}, chunks...); !errors.Is(err, ErrTooLong) || string(b) != "x" {
		t.Fatalf("4 GiB segment: %d bytes, %v", len(b), err)
	}
	if _, err := AppendSettled(nil, SettledHeader{Stream: sid(1), LastSeq: 1}, chunks...); !errors.Is(err, ErrTooLong) {
		t.Fatalf("4 GiB settled object: %v", err)
	}
	if _, err := AppendSettled(nil, SettledHeader{Stream: sid(1), FirstSeq: 1, LastSeq: 1 << 32}, enc(Record{Body: []byte("a")})); !errors.Is(err, ErrTooLong) {
		t.Fatalf("2^32 seqs: %v", err)
	}
	b := NewSettledBuilder(sid(1), 0, 0)
	if err := b.Add(enc(Record{Body: []byte("a")}), 1<<32, 0, 0); !errors.Is(err, ErrTooLong) || b.Count() != 0 {
		t.Fatalf("2^32 records: %v (count %d)", err, b.Count())
	}
}

func golden(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden vector (run go test -update to create): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: encoder output differs from the golden vector: the wire format changed", name)
	}
	return want
}

func TestGoldenFlight(t *testing.T) {
	obj := golden(t, "flight-v1.bin", goldenFlight())
	env, err := ParseEnvelope(obj[:EnvelopeSize])
	if err != nil {
		t.Fatal(err)
	}
	if env.Kind != KindFlight || env.Epoch != 3 || env.Slot != 41 || env.Nonce != nonce() || env.Size != uint64(len(obj)) {
		t.Fatalf("envelope %+v", env)
	}
	f, err := ParseFlight(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Entries) != 3 {
		t.Fatalf("%d entries", len(f.Entries))
	}
	wantEntries := []struct {
		s     StreamID
		first uint64
		n     uint32
		ts0   int64
		ts1   int64
	}{{sid(0xa0), 0, 2, 1700000000000, 1700000000001}, {sid(0xb0), 17, 1, 1700000000002, 1700000000002}, {sid(0xc0), 5, 3, 1700000000003, 1700000000005}}
	for i, w := range wantEntries {
		e := f.Entries[i]
		if e.Stream != w.s || e.FirstSeq != w.first || e.Count != w.n || e.FirstTsMs != w.ts0 || e.LastTsMs != w.ts1 {
			t.Fatalf("entry %d = %+v", i, e)
		}
	}
	// A ref's coordinates are object-absolute: one ranged read decodes the segment.
	e := f.Entries[2]
	info, recs, err := DecodeSegment(obj[e.Offset : e.Offset+e.Length])
	if err != nil {
		t.Fatal(err)
	}
	if info.Stream != sid(0xc0) || len(recs) != 3 || string(recs[0].Body) != "a" || string(recs[0].Headers[0].Name) != "content-type" ||
		string(recs[0].Headers[0].Value) != "text/plain" || len(recs[0].Headers[1].Value) != 0 || string(recs[2].Body) != "ccc" || recs[1].TimestampMs != 1700000000004 {
		t.Fatalf("segment decoded to %+v %+v", info, recs)
	}
}

func TestGoldenPoison(t *testing.T) {
	obj := golden(t, "poison-v1.bin", goldenPoison())
	if len(obj) != EnvelopeSize {
		t.Fatalf("poison is %d bytes", len(obj))
	}
	env, err := ParseEnvelope(obj)
	if err != nil {
		t.Fatal(err)
	}
	if env.Kind != KindPoison || env.Epoch != 3 || env.Slot != 42 || env.Size != 60 || env.FooterOff != 0 || env.FooterLen != 0 {
		t.Fatalf("poison %+v", env)
	}
	if _, err := ParseFlight(obj); !errors.Is(err, ErrKind) {
		t.Fatalf("ParseFlight(poison) = %v, want ErrKind", err)
	}
}

func TestGoldenSettled(t *testing.T) {
	obj := golden(t, "settled-v1.bin", goldenSettled())
	h, recs, err := ParseSettled(obj)
	if err != nil {
		t.Fatal(err)
	}
	if h.Stream != sid(0xc0) || h.FirstSeq != 5 || h.LastSeq != 7 || len(recs) != 3 || string(recs[1].Body) != "bb" {
		t.Fatalf("settled %+v %+v", h, recs)
	}
	// The settled object reuses the segment encoding at offset 64.
	if _, _, err := DecodeSegment(obj[SettledHeaderSize:]); err != nil {
		t.Fatal(err)
	}
}

func TestEnvelopeErrors(t *testing.T) {
	good := goldenPoison()
	flip := func(i int, v byte) []byte { b := bytes.Clone(good); b[i] = v; return b }
	recrc := func(b []byte) []byte { binary.BigEndian.PutUint32(b[56:], CRC(b[:56])); return b }
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short", good[:59], ErrTruncated},
		{"magic", flip(0, 'X'), ErrMagic},
		{"version", recrc(flip(5, 9)), ErrVersion},
		{"crc", flip(20, good[20]^1), ErrCRC},
		{"kind", recrc(flip(6, 7)), ErrKind},
		{"reserved", recrc(flip(7, 1)), ErrMalformed},
		{"poison size", recrc(flip(47, 61)), ErrMalformed},
		{"flight footer out of bounds", recrc(flip(6, byte(KindFlight))), ErrBounds},
	}
	for _, c := range cases {
		_, err := ParseEnvelope(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestFlightCorruption(t *testing.T) {
	good := goldenFlight()
	if _, err := ParseFlight(good[:len(good)-1]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
	// Every single-bit flip after the envelope is caught by some CRC or bound.
	for i := EnvelopeSize; i < len(good); i++ {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		if _, err := ParseFlight(b); err == nil {
			t.Fatalf("bit flip at byte %d went undetected", i)
		}
	}
	// A footer whose entry points outside the segments area is out of bounds,
	// even with a valid CRC.
	env, _ := ParseEnvelope(good)
	f := bytes.Clone(good[env.FooterOff:])
	binary.BigEndian.PutUint32(f[4+28:], 9999)
	binary.BigEndian.PutUint32(f[len(f)-4:], CRC(f[:len(f)-4]))
	if _, err := ParseFooter(env, f); !errors.Is(err, ErrBounds) {
		t.Fatalf("footer out of bounds: %v", err)
	}
}

func TestBatchValidation(t *testing.T) {
	if _, err := ValidateBatch(nil); !errors.Is(err, ErrEmptyBatch) {
		t.Fatal(err)
	}
	many := make([]Record, MaxBatchRecords+1)
	if _, err := ValidateBatch(many); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatal(err)
	}
	if n, err := ValidateBatch(many[:MaxBatchRecords]); err != nil || n != MaxBatchRecords*recordFixed {
		t.Fatal(n, err)
	}
	big := []Record{{Body: make([]byte, MaxBatchMeteredBytes/2)}, {Body: make([]byte, MaxBatchMeteredBytes/2+1)}}
	if _, err := ValidateBatch(big); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatal(err)
	}
	huge := []Record{{Body: make([]byte, MaxRecordBytes+1)}}
	if _, err := ValidateBatch(huge); !errors.Is(err, ErrRecordInvalid) || !strings.Contains(err.Error(), "record 0") {
		t.Fatal(err)
	}
}

// TestRecordSizeIsMetered: the documented limit is 1 MiB per record,
// counted as the body plus header names and values, and exactly that is
// accepted (issue 20 item 5: the largest body accepted was 1,048,562
// bytes, the limit counting the encoding).
func TestRecordSizeIsMetered(t *testing.T) {
	hdr := func(n, v int) Header { return Header{Name: bytes.Repeat([]byte("n"), n), Value: make([]byte, v)} }
	oneByteHeaders := func(n int) []Header {
		hs := make([]Header, n)
		for i := range hs {
			hs[i] = Header{Name: []byte("h")}
		}
		return hs
	}
	for _, tc := range []struct {
		name string
		recs []Record
		want error // nil: accepted
	}{
		{"a body of exactly 1 MiB", []Record{{Body: make([]byte, 1<<20)}}, nil},
		{"a body of 1 MiB + 1", []Record{{Body: make([]byte, 1<<20+1)}}, ErrRecordInvalid},
		{"body and headers summing to 1 MiB", []Record{{Body: make([]byte, 1<<20-300), Headers: []Header{hdr(100, 100), hdr(50, 50)}}}, nil},
		{"body and headers summing to 1 MiB + 1", []Record{{Body: make([]byte, 1<<20-299), Headers: []Header{hdr(100, 100), hdr(50, 50)}}}, ErrRecordInvalid},
		{"two records summing to 1 MiB", []Record{{Body: make([]byte, 1<<19)}, {Body: make([]byte, 1<<19)}}, nil},
		{"1000 records summing to 1 MiB", func() []Record {
			rs := make([]Record, MaxBatchRecords)
			for i := range rs {
				rs[i].Body = make([]byte, 1<<20/MaxBatchRecords)
			}
			rs[0].Body = make([]byte, 1<<20-(MaxBatchRecords-1)*(1<<20/MaxBatchRecords))
			return rs
		}(), nil},
		{"65535 headers in one record", []Record{{Headers: oneByteHeaders(MaxBatchHeaders)}}, nil},
		{"65535 headers over two records", []Record{{Headers: oneByteHeaders(40000)}, {Headers: oneByteHeaders(25535)}}, nil},
		{"65536 headers over two records", []Record{{Headers: oneByteHeaders(40000)}, {Headers: oneByteHeaders(25536)}}, ErrBatchTooLarge},
	} {
		n, err := ValidateBatch(tc.recs)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		case tc.want == nil && (n > MaxBatchBytes || n != len(enc(tc.recs...))):
			t.Errorf("%s: encoded size %d (encoding %d, bound %d)", tc.name, n, len(enc(tc.recs...)), MaxBatchBytes)
		}
	}
	if MeteredSize(Record{Body: []byte("abc"), Headers: []Header{hdr(2, 5)}}) != 10 {
		t.Fatal("MeteredSize is not body + names + values")
	}
	if _, err := ValidateBatch([]Record{{Headers: []Header{{Name: nil}}}}); !errors.Is(err, ErrRecordInvalid) {
		t.Fatal(err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	in := []Record{
		{TimestampMs: -1, Body: []byte{}},
		{TimestampMs: 1 << 50, Headers: []Header{{Name: []byte("a"), Value: bytes.Repeat([]byte("v"), 70000)}}, Body: []byte("x")},
	}
	b := enc(in...)
	if len(b) != EncodedSize(in[0])+EncodedSize(in[1]) {
		t.Fatal("EncodedSize disagrees with AppendRecord")
	}
	out, err := DecodeRecords(b, 2)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].TimestampMs != -1 || len(out[0].Body) != 0 || out[1].TimestampMs != 1<<50 || len(out[1].Headers[0].Value) != 70000 || string(out[1].Body) != "x" {
		t.Fatalf("%+v", out)
	}
	if RecordTimestamp(b[EncodedSize(in[0]):]) != 1<<50 {
		t.Fatal("RecordTimestamp")
	}
	if _, err := DecodeRecords(b, 3); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
}

func TestStreamID(t *testing.T) {
	id := sid(1)
	back, err := ParseStreamID(id.String())
	if err != nil || back != id {
		t.Fatal(back, err)
	}
	for _, bad := range []string{"", "zz", strings.Repeat("g", 32)} {
		if _, err := ParseStreamID(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

func TestBuilderReuseDoesNotAllocate(t *testing.T) {
	b := NewBuilder()
	recs := enc(Record{TimestampMs: 1, Body: bytes.Repeat([]byte("r"), 1024)})
	render := func() {
		b.Reset(1, 2, nonce())
		for s := 0; s < 8; s++ {
			b.BeginSegment(sid(byte(s)), 0)
			for i := 0; i < 16; i++ {
				b.AddRecords(recs, 1, 1, 1)
			}
			b.EndSegment()
		}
		b.Finish()
	}
	render()
	if n := testing.AllocsPerRun(20, render); n != 0 {
		t.Fatalf("steady-state render allocates %.0f times", n)
	}
	if _, err := ParseFlight(b.Finish()); err != nil {
		t.Fatal(err)
	}
}
