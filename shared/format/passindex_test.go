package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// goldenPassIndex is the pass index vector: epoch 3, slots 40-43, three
// streams (one in two slots, one with two producer marks, one with none).
func goldenPassIndex() PassIndex {
	p1, p2 := ProducerID{1}, ProducerID{2}
	return PassIndex{Epoch: 3, FirstSlot: 40, EndSlot: 43, Streams: []PassStream{
		{Stream: sid(1), FirstSeq: 0, LastSeq: 4, FirstTsMs: 1700000000000, LastTsMs: 1700000000009, Bytes: 150,
			Segments: []PassSegment{
				{Slot: 40, FirstSeq: 0, Count: 2, Offset: 60, Length: 96, CRC: 0xdeadbeef},
				{Slot: 42, FirstSeq: 2, Count: 3, Offset: 60, Length: 126, CRC: 0x01020304},
			}},
		{Stream: sid(2), FirstSeq: 7, LastSeq: 9, FirstTsMs: 1700000000001, LastTsMs: 1700000000001, Bytes: 90,
			Segments: []PassSegment{{Slot: 41, FirstSeq: 7, Count: 3, Offset: 156, Length: 126, CRC: 7}},
			Marks: []PassMark{
				{Producer: p1, BatchSeq: 5, FirstSeq: 7, LastSeq: 7},
				{Producer: p2, BatchSeq: 1, FirstSeq: 8, LastSeq: 9},
			}},
		{Stream: sid(9), FirstSeq: 100, LastSeq: 100, FirstTsMs: 5, LastTsMs: 5, Bytes: 30,
			Segments: []PassSegment{{Slot: 42, FirstSeq: 100, Count: 1, Offset: 186, Length: 66, CRC: 9}}},
	}}
}

func goldenPassIndexBytes() []byte {
	b, err := AppendPassIndex(nil, goldenPassIndex())
	if err != nil {
		panic(err)
	}
	return b
}

func TestGoldenPassIndex(t *testing.T) {
	obj := golden(t, "passindex-v1.bin", goldenPassIndexBytes())
	p, err := ParsePassIndex(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenPassIndex()
	if p.Epoch != 3 || p.FirstSlot != 40 || p.EndSlot != 43 || len(p.Streams) != 3 {
		t.Fatalf("header: %+v", p)
	}
	for i, s := range p.Streams {
		w := want.Streams[i]
		if s.Stream != w.Stream || s.FirstSeq != w.FirstSeq || s.LastSeq != w.LastSeq || s.FirstTsMs != w.FirstTsMs ||
			s.LastTsMs != w.LastTsMs || s.Bytes != w.Bytes || !equalSlices(s.Segments, w.Segments) || !equalSlices(s.Marks, w.Marks) {
			t.Fatalf("stream %d: got %+v, want %+v", i, s, w)
		}
	}
	// 48 header + 3*72 streams + 4*32 segments + 2*40 marks + 4 CRC.
	if len(obj) != 48+3*72+4*32+2*40+4 {
		t.Fatalf("size %d", len(obj))
	}
	if i, ok := p.Find(sid(2)); !ok || i != 1 {
		t.Fatalf("Find(sid 2) = %d, %v", i, ok)
	}
	if i, ok := p.Find(sid(5)); ok || i != 2 {
		t.Fatalf("Find(sid 5) = %d, %v; want 2, false", i, ok)
	}
	if i, ok := p.Find(sid(10)); ok || i != 3 {
		t.Fatalf("Find(sid 10) = %d, %v; want 3, false", i, ok)
	}
}

func equalSlices[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// goldenPassIndexV2 is the version-2 vector: the version-1 vector with
// command state on two streams (stream 2 fenced to writer-2 and trimmed
// below seq 8; stream 9 with a configuration and no token).
func goldenPassIndexV2() PassIndex {
	p := goldenPassIndex()
	p.Streams[1].Commands = &StreamCommands{FenceToken: "writer-2", TrimSeq: 8}
	p.Streams[2].Commands = &StreamCommands{HasConfig: true, Config: goldenConfig}
	return p
}

func TestGoldenPassIndexV2(t *testing.T) {
	b, err := AppendPassIndex(nil, goldenPassIndexV2())
	if err != nil {
		t.Fatal(err)
	}
	obj := golden(t, "passindex-v2.bin", b)
	if v := uint16(obj[4])<<8 | uint16(obj[5]); v != PassIndexVersionCommands {
		t.Fatalf("version %d, want %d", v, PassIndexVersionCommands)
	}
	p, err := ParsePassIndex(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenPassIndexV2()
	for i, s := range p.Streams {
		w := want.Streams[i]
		if (s.Commands == nil) != (w.Commands == nil) || (s.Commands != nil && *s.Commands != *w.Commands) {
			t.Fatalf("stream %d: commands %+v, want %+v", i, s.Commands, w.Commands)
		}
		if !equalSlices(s.Segments, w.Segments) || !equalSlices(s.Marks, w.Marks) || s.LastSeq != w.LastSeq {
			t.Fatalf("stream %d: got %+v, want %+v", i, s, w)
		}
	}
	// The v1 layout, then the command table: count 4, two entries of
	// 4 (stream index) + 20 fixed + the token.
	if len(obj) != 48+3*72+4*32+2*40+4+(4+20+8)+(4+20)+4 {
		t.Fatalf("size %d", len(obj))
	}
	// Without command state the writer still writes version 1: the v1
	// vector's bytes, whatever the writer's newest version.
	if v1 := goldenPassIndexBytes(); v1[5] != PassIndexVersion {
		t.Fatalf("an index without command state is written as version %d", v1[5])
	}
	// An empty but present command state is kept (a stream unfenced: the
	// zero state overrides an older ref's token).
	z := goldenPassIndex()
	z.Streams[0].Commands = &StreamCommands{}
	zb, err := AppendPassIndex(nil, z)
	if err != nil {
		t.Fatal(err)
	}
	zp, err := ParsePassIndex(zb)
	if err != nil || zp.Streams[0].Commands == nil || !zp.Streams[0].Commands.IsZero() || zp.Streams[1].Commands != nil {
		t.Fatalf("zero command state: %v, %+v", err, zp.Streams)
	}
}

func TestParsePassIndexV2RefusesCorruption(t *testing.T) {
	b, err := AppendPassIndex(nil, goldenPassIndexV2())
	if err != nil {
		t.Fatal(err)
	}
	v1 := goldenPassIndexBytes()
	recrc := func(b []byte) []byte {
		b = b[:len(b)-4]
		return append(b, byteCRC(b)...)
	}
	mutate := func(src []byte, f func(b []byte) []byte) []byte { return recrc(f(bytes.Clone(src))) }
	table := 48 + 3*72 + 4*32 + 2*40 // where the command table starts
	cases := []struct {
		name string
		obj  []byte
		want error
	}{
		{"v1 labelled v2: no table", mutate(v1, func(b []byte) []byte { b[5] = 2; return b }), ErrTruncated},
		{"v2 labelled v1: bytes after the marks", mutate(b, func(b []byte) []byte { b[5] = 1; return b }), ErrBounds},
		{"empty table", mutate(b, func(b []byte) []byte { return append(append(b[:table], 0, 0, 0, 0), 0, 0, 0, 0) }), ErrMalformed},
		{"stream index out of range", mutate(b, func(b []byte) []byte { b[table+4+32+3] = 3; return b }), ErrMalformed},
		{"stream indexes not increasing", mutate(b, func(b []byte) []byte { b[table+4+32+3] = 1; return b }), ErrMalformed},
		{"token past the table", mutate(b, func(b []byte) []byte { b[table+4+4+8] = MaxFenceTokenBytes + 1; return b }), ErrTruncated},
		{"table truncated", mutate(b, func(b []byte) []byte { return append(b[:len(b)-4-3], 0, 0, 0, 0) }), ErrTruncated},
	}
	for _, c := range cases {
		if _, err := ParsePassIndex(c.obj); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	bad := goldenPassIndexV2()
	bad.Streams[0].Commands = &StreamCommands{FenceToken: string(make([]byte, MaxFenceTokenBytes+1))}
	if _, err := AppendPassIndex(nil, bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("AppendPassIndex with a token too long: %v, want ErrMalformed", err)
	}
}

func TestPassIndexKey(t *testing.T) {
	if got, want := PassIndexKey("star-0", "express", 3, 41), "index/star-0/express/00000000000000000003/00000000000000000041"; got != want {
		t.Fatalf("key %q, want %q", got, want)
	}
}

func TestRunIndexKeys(t *testing.T) {
	if got, want := RunIndexKey("star-0", "express", 3, 41), "index/star-0/express/runs/00000000000000000003/00000000000000000041"; got != want {
		t.Fatalf("run key %q, want %q", got, want)
	}
	pk := PackKey("star-0", "express", 3, 41, 50, 0, 42)
	if want := "packs/star-0/express/00000000000000000003/00000000000000000041-00000000000000000050/00000000000000000042"; pk != want {
		t.Fatalf("pack key %q, want %q", pk, want)
	}
	dk := PackKey("star-0", "express", 3, 41, 50, 0xbeef, 42)
	if want := "packs/star-0/express/00000000000000000003/00000000000000000041-00000000000000000050-0000beef/00000000000000000042"; dk != want {
		t.Fatalf("pack key with a digest %q, want %q", dk, want)
	}
	if p := PackPrefix("star-0", "express", 3, 41); !strings.HasPrefix(pk, p) || !strings.HasPrefix(dk, p) || strings.HasPrefix(PackKey("star-0", "express", 3, 410, 420, 7, 410), p) {
		t.Fatalf("pack prefix %q", p)
	}
	mk := MergedPackKey("star-0", "express", 3, 41, 50, 7, 42)
	if p := MergedPackPrefix("star-0", "express", 3, 41); !strings.HasPrefix(mk, p) || strings.HasPrefix(dk, p) {
		t.Fatalf("merged pack key %q, prefix %q", mk, p)
	}
}

// TestParsePackKey: every key PackKey and MergedPackKey make parses back
// to its parts, with and without a digest; a key one byte off does not.
func TestParsePackKey(t *testing.T) {
	for _, merged := range []bool{false, true} {
		for _, digest := range []uint32{0, 1, 0xffffffff} {
			want := PackKeyParts{Star: "star-0", Class: "express", Merged: merged, Epoch: 3, FirstSlot: 41, EndSlot: 50, Digest: digest, Slot: 49}
			keyOf := PackKey
			if merged {
				keyOf = MergedPackKey
			}
			k := keyOf(want.Star, want.Class, want.Epoch, want.FirstSlot, want.EndSlot, want.Digest, want.Slot)
			if got, ok := ParsePackKey(k); !ok || got != want {
				t.Fatalf("%s: %+v, %t; want %+v", k, got, ok, want)
			}
		}
	}
	good := PackKey("s", "express", 3, 41, 50, 0xab, 42)
	for _, bad := range []string{
		"", "packs/", good + "/", strings.Replace(good, "-000000ab", "-00000000", 1), strings.Replace(good, "-000000ab", "-ab", 1),
		strings.Replace(good, "-000000ab", "-0000000g", 1), strings.Replace(good, "/00000000000000000003/", "/3/", 1),
		strings.Replace(good, "packs/", "pack/", 1), strings.Replace(good, "/express/", "/express/runs/", 1),
		RunIndexKey("s", "express", 3, 41),
	} {
		if p, ok := ParsePackKey(bad); ok {
			t.Errorf("%q parsed: %+v", bad, p)
		}
	}
}

// FuzzParsePackKey: a key ParsePackKey accepts is the key its parts make.
func FuzzParsePackKey(f *testing.F) {
	f.Add(PackKey("s", "express", 3, 41, 50, 0xab, 42))
	f.Add(MergedPackKey("s", "express", 3, 41, 50, 0, 42))
	f.Fuzz(func(t *testing.T, key string) {
		p, ok := ParsePackKey(key)
		if !ok {
			return
		}
		keyOf := PackKey
		if p.Merged {
			keyOf = MergedPackKey
		}
		if k := keyOf(p.Star, p.Class, p.Epoch, p.FirstSlot, p.EndSlot, p.Digest, p.Slot); k != key {
			t.Fatalf("%q parsed to %+v, which makes %q", key, p, k)
		}
	})
}

// A run index's markers (no segment) round-trip, and sit among packed
// entries.
func TestRunIndexMarkers(t *testing.T) {
	p := goldenPassIndex()
	p.Streams[1] = PassStream{Stream: sid(2), FirstSeq: 3, LastSeq: 9, FirstTsMs: 10, LastTsMs: 20}
	b, err := AppendPassIndex(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParsePassIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	m := q.Streams[1]
	if !m.Marker() || m.FirstSeq != 3 || m.LastSeq != 9 || m.FirstTsMs != 10 || m.LastTsMs != 20 || q.Streams[0].Marker() || q.Streams[2].Marker() {
		t.Fatalf("markers after a round trip: %+v", q.Streams)
	}
	if len(b) != 48+3*72+3*32+4 {
		t.Fatalf("size %d", len(b))
	}
}

func TestMergedRunKeys(t *testing.T) {
	if got, want := MergedRunKey("star-0", "express", 3, 41), "index/star-0/express/merged/00000000000000000003/00000000000000000041"; got != want {
		t.Fatalf("merged run key %q, want %q", got, want)
	}
	pk := MergedPackKey("star-0", "express", 3, 41, 50, 0, 42)
	if want := "packs/star-0/express/merged/00000000000000000003/00000000000000000041-00000000000000000050/00000000000000000042"; pk != want {
		t.Fatalf("merged pack key %q, want %q", pk, want)
	}
	if p := MergedPackPrefix("star-0", "express", 3, 41); !strings.HasPrefix(pk, p) || strings.HasPrefix(PackKey("star-0", "express", 3, 41, 50, 0, 42), p) {
		t.Fatalf("merged pack prefix %q", p)
	}
}

// A merged run (design 014, level 2) may hold a stream's marker then its
// packed entry with later seqs: it round-trips, FindAll returns both in
// order, and Find the first.
func TestMergedRunMarkerThenEntry(t *testing.T) {
	p := goldenPassIndex()
	m := PassStream{Stream: p.Streams[1].Stream, FirstSeq: 2, LastSeq: 6, FirstTsMs: 1, LastTsMs: 2}
	p.Streams = append(p.Streams[:1], append([]PassStream{m}, p.Streams[1:]...)...)
	b, err := AppendPassIndex(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParsePassIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	all := q.FindAll(m.Stream)
	if len(all) != 2 || !all[0].Marker() || all[1].Marker() || all[0].LastSeq != 6 || all[1].FirstSeq != 7 {
		t.Fatalf("FindAll: %+v", all)
	}
	if i, ok := q.Find(m.Stream); !ok || i != 1 {
		t.Fatalf("Find: %d %t", i, ok)
	}
	if got := q.FindAll(q.Streams[0].Stream); len(got) != 1 {
		t.Fatalf("FindAll of a single entry: %d", len(got))
	}
	if got := q.FindAll(sid(99)); got != nil {
		t.Fatalf("FindAll of a missing stream: %+v", got)
	}
	// Only that order, and only with later seqs.
	bad := map[string]func(p *PassIndex){
		"entry then marker":  func(p *PassIndex) { p.Streams[1], p.Streams[2] = p.Streams[2], p.Streams[1] },
		"marker overlapping": func(p *PassIndex) { p.Streams[1].LastSeq = 7 },
		"two markers": func(p *PassIndex) {
			p.Streams[2] = PassStream{Stream: m.Stream, FirstSeq: 7, LastSeq: 9}
		},
	}
	for name, breakIt := range bad {
		t.Run(name, func(t *testing.T) {
			r := p
			r.Streams = append([]PassStream(nil), p.Streams...)
			breakIt(&r)
			if _, err := AppendPassIndex(nil, r); !errors.Is(err, ErrMalformed) {
				t.Fatalf("AppendPassIndex: %v, want ErrMalformed", err)
			}
		})
	}
}

// Every invariant the encoder is given broken is refused, and so is the
// same object with the check bypassed (re-encoded by hand, fresh CRC).
func TestPassIndexRefusesMalformed(t *testing.T) {
	cases := map[string]func(p *PassIndex){
		"empty slot range":       func(p *PassIndex) { p.EndSlot = p.FirstSlot },
		"streams out of order":   func(p *PassIndex) { p.Streams[0], p.Streams[1] = p.Streams[1], p.Streams[0] },
		"stream twice":           func(p *PassIndex) { p.Streams[1].Stream = p.Streams[0].Stream },
		"no segment, with bytes": func(p *PassIndex) { p.Streams[2].Segments = nil },
		"marker with marks":      func(p *PassIndex) { p.Streams[1].Segments, p.Streams[1].Bytes = nil, 0 },
		"marker backward": func(p *PassIndex) {
			p.Streams[2].Segments, p.Streams[2].Bytes, p.Streams[2].LastSeq = nil, 0, 99
		},
		"seq gap":               func(p *PassIndex) { p.Streams[0].Segments[1].FirstSeq = 3 },
		"last seq mismatch":     func(p *PassIndex) { p.Streams[0].LastSeq = 5 },
		"zero count":            func(p *PassIndex) { p.Streams[2].Segments[0].Count = 0 },
		"slot outside the pass": func(p *PassIndex) { p.Streams[2].Segments[0].Slot = 43 },
		"slots backward":        func(p *PassIndex) { p.Streams[0].Segments[1].Slot = 39 },
		"timestamps backward":   func(p *PassIndex) { p.Streams[0].LastTsMs = 0 },
		"negative bytes":        func(p *PassIndex) { p.Streams[0].Bytes = -1 },
		"marks overlap":         func(p *PassIndex) { p.Streams[1].Marks[1].FirstSeq = 7 },
		"mark outside":          func(p *PassIndex) { p.Streams[1].Marks[1].LastSeq = 10 },
		"mark without producer": func(p *PassIndex) { p.Streams[1].Marks[0].Producer = ProducerID{} },
		"last seq max": func(p *PassIndex) {
			p.Streams[2].FirstSeq, p.Streams[2].LastSeq = ^uint64(0), ^uint64(0)
			p.Streams[2].Segments[0].FirstSeq = ^uint64(0)
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			p := goldenPassIndex()
			breakIt(&p)
			if _, err := AppendPassIndex(nil, p); !errors.Is(err, ErrMalformed) {
				t.Fatalf("AppendPassIndex: %v, want ErrMalformed", err)
			}
		})
	}
}

func TestParsePassIndexRefusesCorruption(t *testing.T) {
	good := goldenPassIndexBytes()
	recrc := func(b []byte) []byte {
		b = b[:len(b)-4]
		return append(b, byteCRC(b)...)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := []struct {
		name string
		obj  []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short", good[:40], ErrTruncated},
		{"magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), ErrMagic},
		{"version", mutate(func(b []byte) []byte { b[5] = 4; return b }), ErrVersion},
		{"kind", mutate(func(b []byte) []byte { b[6] = 1; return b }), ErrKind},
		{"crc", mutate(func(b []byte) []byte { b[60] ^= 1; return b }), ErrCRC},
		{"truncated body", recrc(bytes.Clone(good[:len(good)-40])), ErrBounds},
		{"stream count", recrc(mutate(func(b []byte) []byte { b[35]++; return b })), ErrBounds},
		{"huge counts", recrc(mutate(func(b []byte) []byte { copy(b[32:44], bytes.Repeat([]byte{0xff}, 12)); return b })), ErrBounds},
		{"segment index", recrc(mutate(func(b []byte) []byte { b[48+72+59]++; return b })), ErrBounds},
		{"reserved", recrc(mutate(func(b []byte) []byte { b[7] = 1; return b })), ErrKind},
		{"seq gap", recrc(mutate(func(b []byte) []byte { b[48+3*72+32+15]++; return b })), ErrMalformed},
	}
	for _, c := range cases {
		if _, err := ParsePassIndex(c.obj); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func byteCRC(b []byte) []byte {
	c := CRC(b)
	return []byte{byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)}
}

func FuzzParsePassIndex(f *testing.F) {
	f.Add(goldenPassIndexBytes())
	if v2, err := AppendPassIndex(nil, goldenPassIndexV2()); err == nil {
		f.Add(v2)
	}
	if v3, err := AppendPassIndex(nil, goldenPassIndexV3()); err == nil {
		f.Add(v3)
	}
	run := goldenPassIndex() // a run index with a marker (design 014, level 1)
	run.Streams[1] = PassStream{Stream: sid(2), FirstSeq: 3, LastSeq: 9, FirstTsMs: 10, LastTsMs: 20}
	if r, err := AppendPassIndex(nil, run); err == nil {
		f.Add(r)
	}
	merged := goldenPassIndex() // a merged run: a stream's marker then its entry (level 2)
	m := PassStream{Stream: merged.Streams[1].Stream, FirstSeq: 2, LastSeq: 6, FirstTsMs: 1, LastTsMs: 2}
	merged.Streams = append(merged.Streams[:1], append([]PassStream{m}, merged.Streams[1:]...)...)
	if r, err := AppendPassIndex(nil, merged); err == nil {
		f.Add(r)
	}
	f.Add(goldenFlight())
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePassIndex(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to the same bytes.
		got, err := AppendPassIndex(nil, p)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("re-encode: %v, equal %v", err, bytes.Equal(got, b))
		}
	})
}

// TestPassIndexDigest: a run's digest is the header's last 4 bytes, read
// back by ParsePassIndex and ParsePassHeader; 0 (a pass index) writes the
// bytes a pass index always had.
func TestPassIndexDigest(t *testing.T) {
	p := goldenPassIndex()
	p.Digest = 0xdeadbeef
	obj, err := AppendPassIndex(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint32(obj[44:48]); got != p.Digest {
		t.Fatalf("header bytes 44-48: %x", got)
	}
	back, err := ParsePassIndex(obj)
	if err != nil || back.Digest != p.Digest {
		t.Fatalf("parsed digest %x, %v", back.Digest, err)
	}
	if h, err := ParsePassHeader(obj); err != nil || h.Digest != p.Digest {
		t.Fatalf("header digest %x, %v", h.Digest, err)
	}
	p.Digest = 0
	if obj, err := AppendPassIndex(nil, p); err != nil || !bytes.Equal(obj, goldenPassIndexBytes()) {
		t.Fatalf("no digest: not the golden bytes (%v)", err)
	}
}
