package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func pmark(p byte, batchSeq, first, last uint64) PassMark {
	return PassMark{Producer: producer(p), BatchSeq: batchSeq, FirstSeq: first, LastSeq: last}
}

// goldenFlightV4: stream a0 carries two producers' acknowledged batches
// below its segment, with a batch of its own; stream b0 has command state
// and no carried table; stream c0 carries one mark and has no batch.
func goldenFlightV4() []byte {
	b := NewBuilder()
	b.Reset(6, 9, nonce())
	b.BeginSegment(sid(0xa0), 40)
	b.AddRecords(enc(Record{TimestampMs: 1700000000020, Body: []byte("x")}), 1, 1700000000020, 1700000000020)
	b.AddBatch(producer(0x11), 5, 40, 1)
	b.SetCarried(40, []PassMark{pmark(0x11, 3, 10, 19), pmark(0x22, 0, 20, 29), pmark(0x11, 4, 30, 39)})
	b.EndSegment()
	b.BeginSegment(sid(0xb0), 7)
	b.AddRecords(enc(FenceRecord("w")), 1, 0, 0)
	b.SetCommands(StreamCommands{FenceToken: "w"})
	b.EndSegment()
	b.BeginSegment(sid(0xc0), 3)
	b.AddRecords(enc(Record{TimestampMs: 1700000000021, Body: []byte("y")}), 1, 1700000000021, 1700000000021)
	b.SetCarried(3, []PassMark{pmark(0x33, 9, 0, 2)})
	b.EndSegment()
	return bytes.Clone(b.Finish())
}

func TestGoldenFlightV4(t *testing.T) {
	obj := golden(t, "flight-v4.bin", goldenFlightV4())
	f, err := ParseFlight(obj)
	if err != nil {
		t.Fatal(err)
	}
	if f.Envelope.Version != VersionCarried || len(f.Entries) != 3 || len(f.Batches) != 1 || len(f.Commands) != 1 || f.Commands[0].Entry != 1 {
		t.Fatalf("%+v", f)
	}
	want := []CarriedEntry{
		{Entry: 0, Below: 40, Marks: []PassMark{pmark(0x11, 3, 10, 19), pmark(0x22, 0, 20, 29), pmark(0x11, 4, 30, 39)}},
		{Entry: 2, Below: 3, Marks: []PassMark{pmark(0x33, 9, 0, 2)}},
	}
	if !reflect.DeepEqual(f.Carried, want) {
		t.Fatalf("carried %+v, want %+v", f.Carried, want)
	}
	if !bytes.Equal(f.Envelope.Bytes(), obj[:EnvelopeSize]) {
		t.Fatal("v4 envelope re-encodes differently")
	}
}

// A flight without a carried table is written as before, byte for byte.
func TestNoCarriedTableKeepsOlderVersions(t *testing.T) {
	b := NewBuilder()
	b.Reset(1, 1, nonce())
	b.BeginSegment(sid(0xa0), 0)
	b.AddRecords(enc(Record{Body: []byte("x")}), 1, 0, 0)
	b.AddBatch(producer(1), 0, 0, 1)
	b.SetCarried(0, nil)
	b.EndSegment()
	f, err := ParseFlight(b.Finish())
	if err != nil || f.Envelope.Version != VersionBatches || f.Carried != nil {
		t.Fatalf("%+v, %v", f, err)
	}
}

func TestCarriedTableErrors(t *testing.T) {
	good := goldenFlightV4()
	env, _ := ParseEnvelope(good)
	foot := good[env.FooterOff:]
	// entries, batch table (1), command table (1 entry, token "w").
	tab := 4 + 3*footerEntrySize + 4 + batchEntrySize + 4 + commandsFixed + 1
	m0 := tab + 4 + carriedEntryFixed // the first carried mark
	mut := func(fn func(f []byte) []byte) []byte { return refooter(foot, fn) }
	cases := []struct {
		name string
		f    []byte
		want error
	}{
		{"zero entries", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab:], 0); return f }), ErrMalformed},
		{"more entries than segments", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab:], 4); return f }), ErrMalformed},
		{"segment out of range", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab+4:], 3); return f }), ErrMalformed},
		{"segments not increasing", mut(func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[tab+4+carriedEntryFixed+3*carriedMarkSize:], 0)
			return f
		}), ErrMalformed},
		{"no marks", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab+8:], 0); return f }), ErrMalformed},
		{"too many marks", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab+8:], MaxCarriedMarks+1); return f }), ErrMalformed},
		{"marks past the table", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab+8:], 9); return f }), ErrTruncated},
		{"zero producer", mut(func(f []byte) []byte { copy(f[m0:], make([]byte, 16)); return f }), ErrMalformed},
		{"mark at the segment", mut(func(f []byte) []byte { binary.BigEndian.PutUint64(f[m0+2*carriedMarkSize+32:], 40); return f }), ErrMalformed},
		{"marks out of order", mut(func(f []byte) []byte { binary.BigEndian.PutUint64(f[m0+carriedMarkSize+24:], 19); return f }), ErrMalformed},
		{"last before first", mut(func(f []byte) []byte { binary.BigEndian.PutUint64(f[m0+32:], 9); return f }), ErrMalformed},
		{"trailing bytes", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab:], 1); return f }), ErrMalformed},
		{"tail past the segment", mut(func(f []byte) []byte { binary.BigEndian.PutUint64(f[tab+4+8:], 41); return f }), ErrMalformed},
		{"mark at the tail", mut(func(f []byte) []byte { binary.BigEndian.PutUint64(f[tab+4+8:], 39); return f }), ErrMalformed},
	}
	for _, c := range cases {
		if _, err := ParseFooterTables(env, c.f); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestCheckCarriedBounds(t *testing.T) {
	var nine []PassMark
	for i := range uint64(9) {
		nine = append(nine, pmark(1, i, i, i))
	}
	if err := CheckCarried(nine[:8], 8); err != nil {
		t.Fatalf("8 marks of one producer below 8: %v", err)
	}
	if err := CheckCarried(nine[:8], 7); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a mark at seq 7, below 7: %v", err)
	}
	if err := CheckCarried(nine, 100); !errors.Is(err, ErrMalformed) {
		t.Fatalf("9 marks of one producer: %v", err)
	}
	many := make([]PassMark, MaxCarriedMarks+1)
	for i := range many {
		many[i] = pmark(byte(i%200+1), uint64(i), uint64(i), uint64(i))
	}
	if err := CheckCarried(many[:MaxCarriedMarks], 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := CheckCarried(many, 1<<20); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%d marks: %v", len(many), err)
	}
}

func TestFlightV4Corruption(t *testing.T) {
	good := goldenFlightV4()
	for i := EnvelopeSize; i < len(good); i++ {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		if _, err := ParseFlight(b); err == nil {
			t.Fatalf("bit flip at byte %d went undetected", i)
		}
	}
}

// refooter is a copy of the footer foot changed by fn, its CRC redone.
func refooter(foot []byte, fn func(f []byte) []byte) []byte {
	f := fn(bytes.Clone(foot))
	binary.BigEndian.PutUint32(f[len(f)-4:], CRC(f[:len(f)-4]))
	return f
}
