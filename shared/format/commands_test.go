package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// goldenFlightV3 is the version-3 vector: epoch 5, slot 2, three streams.
// Stream a0 (seqs 20..21): an ordinary record, then the command record
// fencing it to "writer-2"; its state: token "writer-2", trim 0. Stream b0
// (seq 3): one record of producer 0x33 batch seq 1, no command state.
// Stream c0 (seqs 8..10): the command record trimming it below seq 6, the
// config command record (retention one day, arrival timestamps, uncapped),
// then a record; its state: trim 6, token "t", that config.
func goldenFlightV3() []byte {
	b := NewBuilder()
	b.Reset(5, 2, nonce())
	b.BeginSegment(sid(0xa0), 20)
	b.AddRecords(enc(Record{TimestampMs: 1700000000010, Body: []byte("before")}), 1, 1700000000010, 1700000000010)
	b.AddRecords(enc(FenceRecord("writer-2")), 1, 0, 0)
	b.SetCommands(StreamCommands{FenceToken: "writer-2"})
	b.EndSegment()
	b.BeginSegment(sid(0xb0), 3)
	b.AddRecords(enc(Record{TimestampMs: 1700000000011, Body: []byte("p3-1")}), 1, 1700000000011, 1700000000011)
	b.AddBatch(producer(0x33), 1, 3, 1)
	b.EndSegment()
	b.BeginSegment(sid(0xc0), 8)
	rec := TrimRecord(6)
	rec.TimestampMs = 1700000000012
	cfg := ConfigRecord(goldenConfig)
	cfg.TimestampMs = 1700000000012
	b.AddRecords(enc(rec, cfg, Record{TimestampMs: 1700000000012, Body: []byte("after")}), 3, 1700000000012, 1700000000012)
	b.SetCommands(StreamCommands{FenceToken: "t", TrimSeq: 6, HasConfig: true, Config: goldenConfig})
	b.EndSegment()
	return bytes.Clone(b.Finish())
}

var goldenConfig = StreamConfig{RetentionMs: 86_400_000, TimestampMode: 2, Uncapped: true}

func TestGoldenFlightV3(t *testing.T) {
	obj := golden(t, "flight-v3.bin", goldenFlightV3())
	if v := binary.BigEndian.Uint16(obj[4:6]); v != VersionCommands {
		t.Fatalf("version %d", v)
	}
	f, err := ParseFlight(obj)
	if err != nil {
		t.Fatal(err)
	}
	if f.Envelope.Version != VersionCommands || len(f.Entries) != 3 {
		t.Fatalf("%+v", f)
	}
	if len(f.Batches) != 1 || f.Batches[0] != (BatchEntry{Entry: 1, Producer: producer(0x33), BatchSeq: 1, FirstSeq: 3, Count: 1}) {
		t.Fatalf("batches %+v", f.Batches)
	}
	want := []CommandEntry{{Entry: 0, Commands: StreamCommands{FenceToken: "writer-2"}}, {Entry: 2, Commands: StreamCommands{FenceToken: "t", TrimSeq: 6, HasConfig: true, Config: goldenConfig}}}
	if len(f.Commands) != len(want) || f.Commands[0] != want[0] || f.Commands[1] != want[1] {
		t.Fatalf("commands %+v, want %+v", f.Commands, want)
	}
	if !bytes.Equal(f.Envelope.Bytes(), obj[:EnvelopeSize]) {
		t.Fatal("v3 envelope re-encodes differently")
	}
	// The command records decode as records and say what they are.
	_, recs, err := DecodeSegment(obj[f.Entries[0].Offset : f.Entries[0].Offset+f.Entries[0].Length])
	if err != nil || len(recs) != 2 || CommandOf(recs[0]) != "" || CommandOf(recs[1]) != CommandFence || string(recs[1].Body) != "writer-2" {
		t.Fatalf("segment a0: %+v, %v", recs, err)
	}
	_, recs, err = DecodeSegment(obj[f.Entries[2].Offset : f.Entries[2].Offset+f.Entries[2].Length])
	if err != nil || CommandOf(recs[0]) != CommandTrim || binary.BigEndian.Uint64(recs[0].Body) != 6 || CommandOf(recs[1]) != CommandConfig {
		t.Fatalf("segment c0: %+v, %v", recs, err)
	}
	if c, err := DecodeConfig(recs[1].Body); err != nil || c != goldenConfig {
		t.Fatalf("config record: %+v, %v", c, err)
	}
}

// Older versions still decode, with no command table.
func TestOlderVersionsHaveNoCommands(t *testing.T) {
	for _, obj := range [][]byte{goldenFlight(), goldenFlightV2()} {
		f, err := ParseFlight(obj)
		if err != nil || f.Commands != nil {
			t.Fatalf("%+v, %v", f.Commands, err)
		}
	}
}

// A v3 flight whose batch table is empty (command state, no producer).
func TestFlightV3WithoutBatches(t *testing.T) {
	b := NewBuilder()
	b.Reset(1, 1, nonce())
	b.BeginSegment(sid(0xa0), 0)
	b.AddRecords(enc(FenceRecord("x")), 1, 0, 0)
	b.SetCommands(StreamCommands{FenceToken: "x"})
	b.SetCommands(StreamCommands{FenceToken: "y"}) // the segment's latest state wins
	b.EndSegment()
	f, err := ParseFlight(b.Finish())
	if err != nil || f.Envelope.Version != VersionCommands || f.Batches != nil || len(f.Commands) != 1 || f.Commands[0].Commands.FenceToken != "y" {
		t.Fatalf("%+v, %v", f, err)
	}
}

func TestCommandTableErrors(t *testing.T) {
	good := goldenFlightV3()
	env, _ := ParseEnvelope(good)
	foot := good[env.FooterOff:]
	tab := 4 + 3*footerEntrySize + 4 + batchEntrySize // command table offset
	mut := func(fn func(f []byte) []byte) []byte { return refooter(foot, fn) }
	cases := []struct {
		name string
		f    []byte
		want error
	}{
		{"segment out of range", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab+4:], 3); return f }), ErrMalformed},
		{"segments not increasing", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab+4+commandsFixed+8:], 0); return f }), ErrMalformed},
		{"bad has-config byte", mut(func(f []byte) []byte { f[tab+4+13+8] = 2; return f }), ErrMalformed},
		{"config without has-config", mut(func(f []byte) []byte { f[tab+4+commandsFixed+8+13+1] = 0; return f }), ErrMalformed},
		{"unknown timestamp mode", mut(func(f []byte) []byte { f[tab+4+commandsFixed+8+13+1+1+1] = 3; return f }), ErrMalformed},
		{"zero entries", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab:], 0); return f }), ErrMalformed},
		{"token too long", mut(func(f []byte) []byte { f[tab+4+12] = MaxFenceTokenBytes + 1; return f }), ErrTruncated},
		{"token past the table", mut(func(f []byte) []byte { f[tab+4+12] = MaxFenceTokenBytes; return f }), ErrTruncated},
		{"trailing bytes", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab:], 1); return f }), ErrMalformed},
		{"batch count past the end", mut(func(f []byte) []byte { binary.BigEndian.PutUint32(f[tab-4-batchEntrySize:], 1000); return f }), ErrMalformed},
	}
	for _, c := range cases {
		if _, err := ParseFooterTables(env, c.f); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestFlightV3Corruption(t *testing.T) {
	good := goldenFlightV3()
	for i := EnvelopeSize; i < len(good); i++ {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		if _, err := ParseFlight(b); err == nil {
			t.Fatalf("bit flip at byte %d went undetected", i)
		}
	}
}

func TestCommandsCodec(t *testing.T) {
	for _, c := range []StreamCommands{{}, {FenceToken: "a"}, {TrimSeq: 1 << 60}, {FenceToken: string(bytes.Repeat([]byte("z"), MaxFenceTokenBytes)), TrimSeq: 9},
		{HasConfig: true}, {FenceToken: "q", HasConfig: true, Config: goldenConfig}} {
		got, err := DecodeCommands(AppendCommands(nil, c))
		if err != nil || got != c {
			t.Fatalf("%+v: got %+v, %v", c, got, err)
		}
	}
	for _, b := range [][]byte{nil, make([]byte, 8), append(make([]byte, 8), 2, 'a'), append(make([]byte, 8), 0, 'a'), append(make([]byte, 8), 40),
		append(make([]byte, 9), 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0),    // a config without has-config
		append(make([]byte, 9), 1, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0), // negative retention
	} {
		if _, err := DecodeCommands(b); err == nil {
			t.Fatalf("%x decoded", b)
		}
	}
	if err := (StreamCommands{FenceToken: string(make([]byte, MaxFenceTokenBytes+1))}).Validate(); !errors.Is(err, ErrMalformed) {
		t.Fatal(err)
	}
	// Only a record with exactly one empty-named header is a command.
	for _, r := range []Record{{}, {Headers: []Header{{Name: []byte("x"), Value: []byte("fence")}}}, {Headers: []Header{{Value: []byte("fence")}, {Value: []byte("trim")}}}} {
		if CommandOf(r) != "" {
			t.Fatalf("%+v is a command", r)
		}
	}
}

// TestSealToken: a seal token names its target star and carries the
// fencing token it displaced (ADR 0065); the command state holds one up
// to MaxSealTokenBytes, and nothing longer or malformed.
func TestSealToken(t *testing.T) {
	full := string(bytes.Repeat([]byte("w"), MaxFenceTokenBytes))
	star := string(bytes.Repeat([]byte("s"), MaxMoveTarget))
	for _, tc := range []struct{ to, displaced string }{{"star-1", ""}, {"star-1", "writer-2"}, {star, full}, {"b", "a\x00b"}} {
		tok := SealToken(tc.to, tc.displaced)
		to, displaced, ok := ParseSeal(tok)
		if !ok || to != tc.to || displaced != tc.displaced {
			t.Fatalf("ParseSeal(SealToken(%q, %q)) = %q %q %t", tc.to, tc.displaced, to, displaced, ok)
		}
		c := StreamCommands{FenceToken: tok, TrimSeq: 3}
		if got, err := DecodeCommands(AppendCommands(nil, c)); err != nil || got != c {
			t.Fatalf("seal %q: got %+v, %v", tok, got, err)
		}
	}
	if len(SealToken(star, full)) != MaxSealTokenBytes {
		t.Fatalf("the longest seal token is %d bytes, MaxSealTokenBytes %d", len(SealToken(star, full)), MaxSealTokenBytes)
	}
	if _, _, ok := ParseSeal("writer-2"); ok {
		t.Fatal("a fencing token parsed as a seal")
	}
	for _, bad := range []string{SealToken(star+"s", ""), SealToken("s", full+"w"), SealToken("", "w"), string(make([]byte, MaxFenceTokenBytes+1))} {
		if err := (StreamCommands{FenceToken: bad}).Validate(); !errors.Is(err, ErrMalformed) {
			t.Fatalf("token %q: %v, want ErrMalformed", bad, err)
		}
		if _, err := DecodeCommands(AppendCommands(nil, StreamCommands{FenceToken: bad})); !errors.Is(err, ErrMalformed) {
			t.Fatalf("decode token %q: %v, want ErrMalformed", bad, err)
		}
	}
}

func FuzzDecodeCommands(f *testing.F) {
	f.Add(AppendCommands(nil, StreamCommands{FenceToken: "tok", TrimSeq: 5}))
	f.Add(AppendCommands(nil, StreamCommands{FenceToken: SealToken("star-1", "tok"), TrimSeq: 5}))
	f.Add(AppendCommands(nil, StreamCommands{HasConfig: true, Config: goldenConfig}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := DecodeConfig(b); err == nil && !bytes.Equal(AppendConfig(nil, c), b) {
			t.Fatalf("re-encoded config %+v differs from %x", c, b)
		}
		c, err := DecodeCommands(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendCommands(nil, c), b) {
			t.Fatalf("re-encoded %+v differs from %x", c, b)
		}
	})
}
