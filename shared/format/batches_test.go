package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func producer(b byte) ProducerID {
	var p ProducerID
	for i := range p {
		p[i] = b ^ byte(i)
	}
	return p
}

// goldenFlightV2 is the version-2 vector: epoch 4, slot 7, two streams;
// stream a0 holds two batches of producer 0x11 (batch seqs 8 and 9) and one
// batch with no producer; stream b0 one batch of producer 0x22 (batch seq 0).
func goldenFlightV2() []byte {
	b := NewBuilder()
	b.Reset(4, 7, nonce())
	b.BeginSegment(sid(0xa0), 10)
	b.AddRecords(enc(Record{TimestampMs: 1700000000000, Body: []byte("p1-8")}), 1, 1700000000000, 1700000000000)
	b.AddBatch(producer(0x11), 8, 10, 1)
	b.AddRecords(enc(Record{TimestampMs: 1700000000001, Body: []byte("anon")}), 1, 1700000000001, 1700000000001)
	b.AddRecords(enc(Record{TimestampMs: 1700000000002, Body: []byte("p1-9a")}, Record{TimestampMs: 1700000000002, Body: []byte("p1-9b")}), 2, 1700000000002, 1700000000002)
	b.AddBatch(producer(0x11), 9, 12, 2)
	b.EndSegment()
	b.BeginSegment(sid(0xb0), 0)
	b.AddRecords(enc(Record{TimestampMs: 1700000000003, Body: []byte("p2-0")}), 1, 1700000000003, 1700000000003)
	b.AddBatch(producer(0x22), 0, 0, 1)
	b.EndSegment()
	return bytes.Clone(b.Finish())
}

func TestGoldenFlightV2(t *testing.T) {
	obj := golden(t, "flight-v2.bin", goldenFlightV2())
	if v := binary.BigEndian.Uint16(obj[4:6]); v != VersionBatches {
		t.Fatalf("version %d", v)
	}
	f, err := ParseFlight(obj)
	if err != nil {
		t.Fatal(err)
	}
	if f.Envelope.Version != VersionBatches || len(f.Entries) != 2 {
		t.Fatalf("%+v", f)
	}
	want := []BatchEntry{
		{Entry: 0, Producer: producer(0x11), BatchSeq: 8, FirstSeq: 10, Count: 1},
		{Entry: 0, Producer: producer(0x11), BatchSeq: 9, FirstSeq: 12, Count: 2},
		{Entry: 1, Producer: producer(0x22), BatchSeq: 0, FirstSeq: 0, Count: 1},
	}
	if len(f.Batches) != len(want) {
		t.Fatalf("batches %+v", f.Batches)
	}
	for i := range want {
		if f.Batches[i] != want[i] {
			t.Fatalf("batch %d = %+v, want %+v", i, f.Batches[i], want[i])
		}
	}
	// The envelope re-encodes to its version.
	if !bytes.Equal(f.Envelope.Bytes(), obj[:EnvelopeSize]) {
		t.Fatal("v2 envelope re-encodes differently")
	}
	// ParseFooter (the entries alone) reads a v2 footer too.
	entries, err := ParseFooter(f.Envelope, obj[f.Envelope.FooterOff:])
	if err != nil || len(entries) != 2 {
		t.Fatal(entries, err)
	}
}

// A flight without producer batches stays version 1, byte for byte: no cost
// when no producer id is given.
func TestNoProducerStaysV1(t *testing.T) {
	obj := goldenFlight()
	if v := binary.BigEndian.Uint16(obj[4:6]); v != Version {
		t.Fatalf("version %d", v)
	}
	f, err := ParseFlight(obj)
	if err != nil || f.Batches != nil || f.Envelope.Version != 0 {
		t.Fatal(f, err)
	}
}

func TestBatchTableErrors(t *testing.T) {
	good := goldenFlightV2()
	env, _ := ParseEnvelope(good)
	foot := good[env.FooterOff:]
	tab := 4 + 2*footerEntrySize // batch table offset in the footer
	mut := func(fn func(f []byte)) []byte {
		f := bytes.Clone(foot)
		fn(f)
		binary.BigEndian.PutUint32(f[len(f)-4:], CRC(f[:len(f)-4]))
		return f
	}
	cases := []struct {
		name string
		f    []byte
		want error
	}{
		{"segment index out of range", mut(func(f []byte) { binary.BigEndian.PutUint32(f[tab+4:], 2) }), ErrMalformed},
		{"zero count", mut(func(f []byte) { binary.BigEndian.PutUint32(f[tab+4+36:], 0) }), ErrMalformed},
		{"zero producer", mut(func(f []byte) { clear(f[tab+4+4 : tab+4+20]) }), ErrMalformed},
		{"outside its segment", mut(func(f []byte) { binary.BigEndian.PutUint64(f[tab+4+28:], 9) }), ErrBounds},
		{"overlapping", mut(func(f []byte) { binary.BigEndian.PutUint64(f[tab+4+40+28:], 10) }), ErrBounds},
		{"segments out of order", mut(func(f []byte) {
			binary.BigEndian.PutUint32(f[tab+4+40:], 1) // batch 1 in segment 1
			binary.BigEndian.PutUint64(f[tab+4+40+28:], 0)
			binary.BigEndian.PutUint32(f[tab+4+40+36:], 1)
			binary.BigEndian.PutUint32(f[tab+4+80:], 0) // batch 2 back in segment 0
			binary.BigEndian.PutUint64(f[tab+4+80+28:], 12)
			binary.BigEndian.PutUint32(f[tab+4+80+36:], 2)
		}), ErrMalformed},
		{"count disagrees with length", mut(func(f []byte) { binary.BigEndian.PutUint32(f[tab:], 4) }), ErrMalformed},
	}
	for _, c := range cases {
		if _, _, err := ParseFooterBatches(env, c.f); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// A version-1 envelope over a v2 footer: the trailing table is malformed.
	v1 := env
	v1.Version = 0
	if _, err := ParseFooter(v1, foot); !errors.Is(err, ErrMalformed) {
		t.Errorf("v1 envelope over a v2 footer: %v", err)
	}
	// A poison never claims version 2.
	p := Poison(1, 1, nonce()).Bytes()
	binary.BigEndian.PutUint16(p[4:], VersionBatches)
	binary.BigEndian.PutUint32(p[56:], CRC(p[:56]))
	if _, err := ParseEnvelope(p); !errors.Is(err, ErrVersion) {
		t.Errorf("v2 poison: %v", err)
	}
}

func TestFlightV2Corruption(t *testing.T) {
	good := goldenFlightV2()
	for i := EnvelopeSize; i < len(good); i++ {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		if _, err := ParseFlight(b); err == nil {
			t.Fatalf("bit flip at byte %d went undetected", i)
		}
	}
}

func FuzzParseFlightV2(f *testing.F) {
	f.Add(goldenFlightV2())
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := ParseFlight(b)
		if err != nil {
			return
		}
		for _, be := range fl.Batches {
			e := fl.Entries[be.Entry]
			if be.FirstSeq < e.FirstSeq || be.LastSeq() > e.LastSeq() || be.Producer.IsZero() {
				t.Fatalf("accepted batch %+v outside segment %+v", be, e)
			}
		}
	})
}
