package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// goldenPassIndexV3 is the version-3 vector: the version-1 vector with a
// carried table on stream 2 (marks below its part) and on stream 9, and
// no command state (the command table is then empty).
func goldenPassIndexV3() PassIndex {
	p := goldenPassIndex()
	p.Streams[1].Carried = []PassMark{{Producer: ProducerID{3}, BatchSeq: 0, FirstSeq: 1, LastSeq: 2}, {Producer: ProducerID{1}, BatchSeq: 4, FirstSeq: 5, LastSeq: 6}}
	p.Streams[1].CarriedBelow = 7
	p.Streams[2].Carried = []PassMark{{Producer: ProducerID{1}, BatchSeq: 5, FirstSeq: 7, LastSeq: 7}}
	p.Streams[2].CarriedBelow = 100
	return p
}

func TestGoldenPassIndexV3(t *testing.T) {
	b, err := AppendPassIndex(nil, goldenPassIndexV3())
	if err != nil {
		t.Fatal(err)
	}
	obj := golden(t, "passindex-v3.bin", b)
	if v := binary.BigEndian.Uint16(obj[4:6]); v != PassIndexVersionCarried {
		t.Fatalf("version %d, want %d", v, PassIndexVersionCarried)
	}
	p, err := ParsePassIndex(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenPassIndexV3()
	for i, s := range p.Streams {
		if !reflect.DeepEqual(s.Carried, want.Streams[i].Carried) || s.CarriedBelow != want.Streams[i].CarriedBelow || s.Commands != nil {
			t.Fatalf("stream %d: carried %+v, commands %+v, want %+v", i, s.Carried, s.Commands, want.Streams[i].Carried)
		}
	}
	// The v1 layout, an empty command table, then the carried table:
	// count 2, entries of 8 bytes and their marks.
	if len(obj) != 48+3*72+4*32+2*40+4+4+(16+2*40)+(16+40)+4 {
		t.Fatalf("size %d", len(obj))
	}
	// With command state too, both tables round-trip.
	both := goldenPassIndexV3()
	both.Streams[0].Commands = &StreamCommands{FenceToken: "f"}
	b, err = AppendPassIndex(nil, both)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParsePassIndex(b)
	if err != nil || got.Streams[0].Commands == nil || got.Streams[0].Commands.FenceToken != "f" || !reflect.DeepEqual(got.Streams[1].Carried, both.Streams[1].Carried) {
		t.Fatalf("%+v, %v", got, err)
	}
	// Ranged: a stream's entries by pieces carry its table.
	h, err := ParsePassHeader(b)
	if err != nil || h.Version != PassIndexVersionCarried {
		t.Fatalf("%+v, %v", h, err)
	}
	cmds, carried, err := ParsePassTail(h, b[h.CommandsAt():])
	if err != nil || len(cmds) != 1 || len(carried) != 2 || carried[0].Entry != 1 || carried[1].Entry != 2 {
		t.Fatalf("tail: %+v %+v %v", cmds, carried, err)
	}
}

func TestPassIndexCarriedRefused(t *testing.T) {
	cases := map[string]func(p *PassIndex){
		"mark above the stream": func(p *PassIndex) { p.Streams[1].Carried[1].LastSeq = 10 },
		"mark at the tail":      func(p *PassIndex) { p.Streams[1].CarriedBelow = 6 },
		"tail past the stream":  func(p *PassIndex) { p.Streams[2].CarriedBelow = 102 },
		"tail without a table":  func(p *PassIndex) { p.Streams[0].CarriedBelow = 1 },
		"marks out of order":    func(p *PassIndex) { p.Streams[1].Carried[0].FirstSeq, p.Streams[1].Carried[0].LastSeq = 5, 6 },
		"no producer":           func(p *PassIndex) { p.Streams[2].Carried[0].Producer = ProducerID{} },
		"on a marker": func(p *PassIndex) {
			p.Streams[1] = PassStream{Stream: sid(2), FirstSeq: 3, LastSeq: 9, FirstTsMs: 10, LastTsMs: 20, Carried: p.Streams[1].Carried}
		},
	}
	for name, mod := range cases {
		p := goldenPassIndexV3()
		mod(&p)
		if _, err := AppendPassIndex(nil, p); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: encoded: %v", name, err)
		}
	}
	// Bytes the writer would not write: a carried entry's stream index out
	// of range, and an empty carried table, are refused by the parser.
	good, _ := AppendPassIndex(nil, goldenPassIndexV3())
	h, _ := ParsePassHeader(good)
	tab := int(h.CommandsAt()) + 4 // after the empty command table
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[len(b)-4:], CRC(b[:len(b)-4]))
		return b
	}
	bad := map[string][]byte{
		"stream out of range": recrc(func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[tab+4:], 3); return b }()),
		"empty carried table": recrc(append(bytes.Clone(good[:tab]), 0, 0, 0, 0, 0, 0, 0, 0)),
		"tail above stream 9": recrc(func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint64(b[len(b)-4-40-8:], 102); return b }()),
	}
	for name, b := range bad {
		if _, err := ParsePassIndex(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
