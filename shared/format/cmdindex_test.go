package format

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomCommandRun is randomPassIndex (merged pairs included) with one
// packed entry in every `every` with command state, tokens of 0 to 36
// bytes, some with a configuration.
func randomCommandRun(rng *rand.Rand, n, every int) PassIndex {
	p := randomPassIndex(rng, n, 0, true, false)
	for i := range p.Streams {
		s := &p.Streams[i]
		if s.Marker() || rng.IntN(every) != 0 {
			continue
		}
		c := &StreamCommands{FenceToken: strings.Repeat("t", rng.IntN(MaxFenceTokenBytes+1)), TrimSeq: rng.Uint64N(100)}
		if rng.IntN(2) == 0 {
			c.HasConfig, c.Config = true, StreamConfig{RetentionMs: rng.Int64N(1e6), TimestampMode: uint8(rng.IntN(3)), Uncapped: rng.IntN(2) == 0}
		}
		s.Commands = c
	}
	return p
}

// cmdxLookup finds stream table entry idx's command state in run from
// pieces alone, as a ranged reader does: the run's header, the command
// index's header, the run's tail from the size the index records, the
// index's block of idx, then the entry.
func cmdxLookup(run, cmdx []byte, idx uint32) (*StreamCommands, error) {
	rh, err := ParsePassHeader(run)
	if err != nil {
		return nil, err
	}
	h, err := ParseCommandIndexHeader(cmdx)
	if err != nil {
		return nil, err
	}
	if h.RunSize < 4 || h.RunSize > int64(len(run)) {
		return nil, ErrTruncated
	}
	if err := CheckCommandIndexRun(h, rh, run[h.RunSize-4:]); err != nil {
		return nil, err
	}
	blk := idx / CommandIndexBlock
	off, n := CommandIndexBlockAt(rh, blk)
	if off+n > int64(len(cmdx)) {
		return nil, ErrTruncated
	}
	cb, err := ParseCommandIndexBlock(h, blk, cmdx[off:off+n])
	if err != nil {
		return nil, err
	}
	eoff, size, ok := cb.Entry(rh, idx)
	if !ok {
		return nil, nil
	}
	if eoff+size > int64(len(run)) {
		return nil, ErrTruncated
	}
	c, err := ParseCommandEntry(rh, idx, run[eoff:eoff+size])
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// TestCommandIndexEqualsTable: on random version 2 runs (merged pairs,
// tokens of every length, 1 to 3,000 streams: one block, a full block,
// several), every stream table entry's state found through the command
// index is the one the whole object's decoding gives it; the index's
// size is CommandIndexSize; a version 1 object has none.
func TestCommandIndexEqualsTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 3))
	for _, n := range []int{1, 5, 700, 1024, 1025, 3000} {
		for _, every := range []int{1, 3, 50} {
			p := randomCommandRun(rng, n, every)
			p.Digest = rng.Uint32() // a run's plan digest: not in the index, bound by the run's CRC
			obj, err := AppendPassIndex(nil, p)
			if err != nil {
				t.Fatal(err)
			}
			rh, _ := ParsePassHeader(obj)
			cmdx, err := AppendCommandIndex(nil, obj)
			if rh.Version == PassIndexVersion {
				if !errors.Is(err, ErrVersion) {
					t.Fatalf("n=%d: index of a version 1 object: %v", n, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(cmdx)) != CommandIndexSize(rh) {
				t.Fatalf("n=%d: index of %d bytes, CommandIndexSize %d", n, len(cmdx), CommandIndexSize(rh))
			}
			again, _ := AppendCommandIndex(nil, obj)
			if string(again) != string(cmdx) {
				t.Fatal("the index is not a function of the run")
			}
			other := p
			other.Digest++ // another plan of the run: another CRC
			if ob, err := AppendPassIndex(nil, other); err != nil {
				t.Fatal(err)
			} else if _, err := cmdxLookup(ob, cmdx, 0); !errors.Is(err, ErrCRC) {
				t.Fatalf("n=%d: the index of a run with another digest: %v, want ErrCRC", n, err)
			}
			for i, s := range p.Streams {
				got, err := cmdxLookup(obj, cmdx, uint32(i))
				if err != nil {
					t.Fatalf("n=%d: stream %d: %v", n, i, err)
				}
				if (got == nil) != (s.Commands == nil) || (got != nil && *got != *s.Commands) {
					t.Fatalf("n=%d: stream %d: %+v, want %+v", n, i, got, s.Commands)
				}
			}
		}
	}
	v1, err := AppendPassIndex(nil, goldenPassIndex())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AppendCommandIndex(nil, v1); !errors.Is(err, ErrVersion) {
		t.Fatalf("index of a version 1 object: %v", err)
	}
}

// TestCommandIndexRefusesCorruption: every byte of an index flipped, or
// the index put beside another run (another plan at the run's key: one
// stream's state changed, or one more stream), every lookup is an error
// or the true state, never another state.
func TestCommandIndexRefusesCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 9))
	p := randomCommandRun(rng, 1100, 2)
	obj, err := AppendPassIndex(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	cmdx, err := AppendCommandIndex(nil, obj)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, run, idx []byte, want PassIndex, near int) (errs int) {
		t.Helper()
		for i, s := range want.Streams {
			if near >= 0 && i%16 != 0 && (i < near-2 || i > near+2) {
				continue // a sample, and the streams around the flipped byte's
			}
			got, err := cmdxLookup(run, idx, uint32(i))
			if err != nil {
				errs++
				continue
			}
			if (got == nil) != (s.Commands == nil) || (got != nil && *got != *s.Commands) {
				t.Fatalf("%s: stream %d: %+v, want %+v", what, i, got, s.Commands)
			}
		}
		return errs
	}
	// Every bit of the header, of the first block's offset, first and last
	// sizes and CRC, and of the whole second block, flipped one at a time
	// (a sample of the streams looked up each time, and those around the
	// flipped size).
	var positions []int
	for at := range len(cmdx) {
		if at < 64+8+32 || (at >= 64+12+1024-40 && at < 64+12+1024) || at >= 64+12+1024 {
			positions = append(positions, at)
		}
	}
	for _, at := range positions {
		for bit := range 8 {
			bad := append([]byte(nil), cmdx...)
			bad[at] ^= 1 << bit
			near := 0 // the stream whose size byte it is, if one
			if b := (at - 64) / (12 + CommandIndexBlock); at >= 64 {
				near = b*CommandIndexBlock + (at-64)%(12+CommandIndexBlock) - 8
			}
			if errs := check("flipped", obj, bad, p, max(near, 0)); errs == 0 {
				t.Fatalf("byte %d bit %d flipped: no lookup refused it", at, bit)
			}
		}
	}
	// Another plan of the run: one stream's state changed (same size),
	// then a state dropped (another size).
	other := p
	other.Streams = append([]PassStream(nil), p.Streams...)
	for i := range other.Streams {
		if c := other.Streams[i].Commands; c != nil {
			cs := *c
			cs.TrimSeq++
			other.Streams[i].Commands = &cs
			break
		}
	}
	obj2, err := AppendPassIndex(nil, other)
	if err != nil {
		t.Fatal(err)
	}
	if errs := check("index of another plan (same size)", obj2, cmdx, other, -1); errs != len(other.Streams) {
		t.Fatalf("index of another plan: %d of %d lookups refused", errs, len(other.Streams))
	}
	for i := range other.Streams {
		if other.Streams[i].Commands != nil {
			other.Streams[i].Commands = nil
			break
		}
	}
	obj3, err := AppendPassIndex(nil, other)
	if err != nil {
		t.Fatal(err)
	}
	if errs := check("index of another plan (smaller)", obj3, cmdx, other, -1); errs != len(other.Streams) {
		t.Fatalf("index of another plan: %d of %d lookups refused", errs, len(other.Streams))
	}
	// A run truncated or corrupted is refused by AppendCommandIndex.
	if _, err := AppendCommandIndex(nil, obj[:len(obj)-1]); err == nil {
		t.Fatal("index of a truncated run")
	}
	bad := append([]byte(nil), obj...)
	bad[len(bad)-10] ^= 1
	if _, err := AppendCommandIndex(nil, bad); !errors.Is(err, ErrCRC) {
		t.Fatalf("index of a corrupted run: %v", err)
	}
}

// TestCommandIndexGolden pins the layout: a two-stream run, the second
// with a token, its index byte for byte.
func TestCommandIndexGolden(t *testing.T) {
	obj, err := AppendPassIndex(nil, goldenPassIndexV2())
	if err != nil {
		t.Fatal(err)
	}
	cmdx, err := AppendCommandIndex(nil, obj)
	if err != nil {
		t.Fatal(err)
	}
	rh, _ := ParsePassHeader(obj)
	if string(cmdx[0:8]) != "STRX\x00\x01\x05\x00" || string(cmdx[8:44]) != string(obj[8:44]) ||
		binary.BigEndian.Uint32(cmdx[44:48]) != binary.BigEndian.Uint32(obj[len(obj)-4:]) ||
		binary.BigEndian.Uint64(cmdx[48:56]) != uint64(len(obj)) || binary.BigEndian.Uint64(cmdx[64:72]) != 4 {
		t.Fatalf("header or block offset: % x", cmdx[:72])
	}
	if int64(len(cmdx)) != 64+12+int64(rh.Streams) {
		t.Fatalf("%d bytes for %d streams", len(cmdx), rh.Streams)
	}
	p, _ := ParsePassIndex(obj)
	for i, s := range p.Streams {
		size := byte(0)
		if s.Commands != nil {
			size = byte(commandsFixed + len(s.Commands.FenceToken))
		}
		if cmdx[72+i] != size {
			t.Fatalf("stream %d: size %d, want %d", i, cmdx[72+i], size)
		}
	}
}

func cmdxSeeds(f *testing.F) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, n := range []int{1, 3, 20} {
		obj, err := AppendPassIndex(nil, randomCommandRun(rng, n, 1))
		if err != nil {
			continue
		}
		if cmdx, err := AppendCommandIndex(nil, obj); err == nil {
			f.Add(cmdx, obj)
		}
	}
}

// FuzzCommandIndex: on any index and run bytes, the command index's
// decoders never panic, and a lookup that succeeds on a run that
// ParsePassIndex accepts finds the state the whole decoding gives.
func FuzzCommandIndex(f *testing.F) {
	cmdxSeeds(f)
	f.Fuzz(func(t *testing.T, cmdx, run []byte) {
		h, err := ParseCommandIndexHeader(cmdx)
		if err == nil {
			for b := range min(h.Blocks(), 4) {
				off, n := CommandIndexBlockAt(h.Run, b)
				if off+n <= int64(len(cmdx)) {
					if cb, err := ParseCommandIndexBlock(h, b, cmdx[off:off+n]); err == nil {
						if off, size, ok := cb.Entry(h.Run, cb.First); ok && (size < commandsFixed || off < h.Run.CommandsAt()+4) {
							t.Fatalf("entry at %d of %d bytes", off, size)
						}
					}
				}
			}
		}
		whole, werr := ParsePassIndex(run)
		for i := range min(len(whole.Streams), 64) {
			got, err := cmdxLookup(run, cmdx, uint32(i))
			if werr != nil || err != nil {
				continue
			}
			want := whole.Streams[i].Commands
			if (got == nil) != (want == nil) || (got != nil && *got != *want) {
				t.Fatalf("stream %d: %+v, want %+v", i, got, want)
			}
		}
	})
}

// FuzzParseCommandEntry: on any bytes, ParseCommandEntry never panics and
// accepts only one entry of the stream asked for, with valid state.
func FuzzParseCommandEntry(f *testing.F) {
	obj, _ := AppendPassIndex(nil, goldenPassIndexV2())
	if h, err := ParsePassHeader(obj); err == nil {
		f.Add(obj[h.CommandsAt()+4:len(obj)-4], uint32(1), uint32(h.Streams))
	}
	f.Fuzz(func(t *testing.T, b []byte, idx, streams uint32) {
		c, err := ParseCommandEntry(PassHeader{Streams: streams}, idx, b)
		if err != nil {
			return
		}
		if idx >= streams || binary.BigEndian.Uint32(b) != idx || c.Validate() != nil {
			t.Fatalf("entry of stream %d of %d accepted: %+v", idx, streams, c)
		}
	})
}
