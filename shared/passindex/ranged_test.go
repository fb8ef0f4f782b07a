package passindex_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// randomRun is a valid run of n streams: ids uniform (skew 0), sharing
// their first 8 bytes (1), or small integers in their first 8 bytes (2:
// clustered at the low end, as windowOfRuns's); with merged, a third a
// marker then a packed entry; with commands, a fifth with command state.
func randomRun(rng *rand.Rand, n, skew int, merged, commands bool) format.PassIndex {
	p := format.PassIndex{Epoch: 2, FirstSlot: 10, EndSlot: 20}
	seen := map[format.StreamID]bool{}
	var ids []format.StreamID
	for len(ids) < n {
		var id format.StreamID
		switch skew {
		case 0:
			binary.BigEndian.PutUint64(id[:8], rng.Uint64())
			binary.BigEndian.PutUint64(id[8:], rng.Uint64())
		case 1:
			copy(id[:8], "prefix!!")
			binary.BigEndian.PutUint64(id[8:], rng.Uint64N(uint64(4*n+1)))
		default:
			binary.BigEndian.PutUint64(id[:8], rng.Uint64N(uint64(4*n+1)))
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		seq := rng.Uint64N(1000)
		if merged && rng.IntN(3) == 0 {
			p.Streams = append(p.Streams, format.PassStream{Stream: id, FirstSeq: seq, LastSeq: seq + 4, FirstTsMs: 5, LastTsMs: 6})
			seq += 5
		}
		s := format.PassStream{Stream: id, FirstSeq: seq, FirstTsMs: 10, LastTsMs: 12, Bytes: 100}
		slot := p.FirstSlot
		for range 1 + rng.IntN(3) {
			slot = min(slot+rng.Uint64N(3), p.EndSlot-1)
			count := 1 + rng.Uint32N(5)
			s.Segments = append(s.Segments, format.PassSegment{Slot: slot, FirstSeq: seq, Count: count, Offset: rng.Uint32(), Length: 100, CRC: rng.Uint32()})
			seq += uint64(count)
		}
		s.LastSeq = seq - 1
		if rng.IntN(3) == 0 {
			s.Marks = []format.PassMark{{Producer: format.ProducerID{1}, BatchSeq: 1, FirstSeq: s.FirstSeq, LastSeq: s.LastSeq}}
		}
		if commands && rng.IntN(5) == 0 {
			s.Commands = &format.StreamCommands{FenceToken: "token", TrimSeq: 3}
		}
		p.Streams = append(p.Streams, s)
	}
	return p
}

// TestFindRangedEqualsFindAll: a stream's entries read by range equal
// what FindAll finds in the decoded object, with and without command
// state, for objects of 0, 1, few and many streams (several stream table
// blocks), uniform and skewed ids, merged runs' marker and packed pairs,
// versions 1, 2 and 3 (carried tables), and absent ids. With uniform
// ids at 20,000 streams a
// lookup costs at most the header, two blocks, the segments, the marks
// and the command table.
func TestFindRangedEqualsFindAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 5, 2000, 20000} {
		for skew := range 3 {
			for _, merged := range []bool{false, true} {
				p := randomRun(rng, n, skew, merged, n != 5)
				if n == 2000 || n == 20000 && skew == 0 {
					p = withCarried(p) // version 3: carried tables come with the entries
				}
				obj, err := format.AppendPassIndex(nil, p)
				if err != nil {
					t.Fatal(err)
				}
				whole, err := format.ParsePassIndex(obj)
				if err != nil {
					t.Fatal(err)
				}
				bucket := &countingBucket{Bucket: objstore.NewMem("settled")}
				if err := bucket.PutIfAbsent(t.Context(), "run", obj); err != nil {
					t.Fatal(err)
				}
				ids := []format.StreamID{{}, {0xff, 0xff}}
				for i := 0; i < len(p.Streams); i += 1 + len(p.Streams)/200 {
					ids = append(ids, p.Streams[i].Stream)
					var before format.StreamID // an absent id just before
					before = p.Streams[i].Stream
					before[15]--
					ids = append(ids, before)
				}
				for _, id := range ids {
					want := whole.FindAll(id)
					for _, commands := range []bool{true, false} {
						gets := bucket.gets.Load()
						got, err := passindex.FindRanged(t.Context(), bucket, "run", id, commands)
						if err != nil {
							t.Fatalf("n=%d skew=%d merged=%v id %s: %v", n, skew, merged, id, err)
						}
						w := slices.Clone(want)
						if !commands {
							for i := range w {
								w[i].Commands = nil
							}
						}
						if !reflect.DeepEqual(got, w) && !(len(got) == 0 && len(w) == 0) {
							t.Fatalf("n=%d skew=%d merged=%v id %s commands %v: ranged %+v, whole %+v", n, skew, merged, id, commands, got, w)
						}
						if n == 20000 && skew == 0 && bucket.gets.Load()-gets > 6 {
							t.Fatalf("uniform ids, %d streams: %d GETs for one lookup, want at most 6", n, bucket.gets.Load()-gets)
						}
					}
				}
			}
		}
	}
}

// TestFindRangedRefusesCorruption: a truncated or corrupt object read by
// range gives the format's sentinel errors (the whole-object CRC is not
// read; the pieces' checks stand in), never a panic or a huge allocation.
func TestFindRangedRefusesCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	p := randomRun(rng, 3000, 0, true, true)
	obj, err := format.AppendPassIndex(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	h, err := format.ParsePassHeader(obj)
	if err != nil {
		t.Fatal(err)
	}
	id := p.Streams[len(p.Streams)/2].Stream
	put32 := func(at int64, v uint32) []byte {
		b := bytes.Clone(obj)
		binary.BigEndian.PutUint32(b[at:], v)
		return b
	}
	mid := h.EntryAt(uint32(len(p.Streams) / 2))
	// The command table giving a merged run's marker the state of the
	// packed entry after it (its entry's stream index decremented).
	markerID, markerState := format.StreamID{}, []byte(nil)
	if whole, err := format.ParsePassIndex(obj); err == nil {
		at := h.CommandsAt() + 4
		for i, s := range whole.Streams {
			if s.Commands == nil {
				continue
			}
			if i > 0 && whole.Streams[i-1].Marker() && whole.Streams[i-1].Stream == s.Stream && markerState == nil {
				markerID, markerState = s.Stream, put32(at, uint32(i-1))
			}
			at += 4 + int64(len(format.AppendCommands(nil, *s.Commands)))
		}
	}
	if markerState == nil {
		t.Fatal("no marker then packed entry with command state in the fixture")
	}
	for _, tc := range []struct {
		name string
		obj  []byte
		err  error
	}{
		{"empty", nil, format.ErrTruncated},
		{"header cut", obj[:30], format.ErrTruncated},
		{"bad magic", append([]byte("XXXX"), obj[4:]...), format.ErrMagic},
		{"cut in the stream table", obj[:h.EntryAt(10)], format.ErrTruncated},
		{"cut in the segment table", obj[:h.SegmentAt(h.Segments/2)], format.ErrTruncated},
		{"counts claim 4 billion streams", put32(32, 1<<32-1), format.ErrTruncated},
		{"entry's segments past the table", put32(mid+56, h.Segments), format.ErrBounds},
		{"entry's segments not continuing", put32(mid+56, 0), format.ErrBounds},
		{"stream ids out of order", func() []byte {
			b := bytes.Clone(obj)
			copy(b[mid-format.PassEntrySize:], bytes.Repeat([]byte{0xff}, 16))
			return b
		}(), format.ErrMalformed},
		{"a marker with command state", markerState, format.ErrMalformed},
	} {
		if tc.name == "a marker with command state" {
			id = markerID
		}
		bucket := objstore.NewMem("settled")
		if tc.obj != nil {
			if err := bucket.PutIfAbsent(t.Context(), "run", tc.obj); err != nil {
				t.Fatal(err)
			}
		} else if err := bucket.PutIfAbsent(t.Context(), "run", []byte{}); err != nil {
			t.Fatal(err)
		}
		if _, err := passindex.FindRanged(t.Context(), bucket, "run", id, true); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}

// TestWindowLookupPastBudget: a per-stream lookup over a window four
// times its cache's budget reads each uncached object by range, not
// whole: under an eighth of the window's bytes per lookup with command
// state (each object's command table, a fifth of the streams having
// some), a sixteenth without (HeadParts) or for the last part alone
// (HeadLastRef: one command table), the same parts as an unbounded
// window (these ids are clustered: two or three stream table blocks per
// object). Before ranged lookups, each such lookup
// fetched every object not cached whole (a quarter of the window cached,
// three quarters refetched).
func TestWindowLookupPastBudget(t *testing.T) {
	const runs, streams = 8, 20_000
	meta, bucket, h, all := windowOfRuns(t, runs, streams)
	per := passindex.DecodedBytes(&all[0])
	var window int64
	for _, r := range all {
		obj, err := format.AppendPassIndex(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		window += int64(len(obj))
	}
	all = nil
	ref := &passindex.Window{Meta: meta, Bucket: bucket, MaxBytes: -1}
	w := &passindex.Window{Meta: meta, Bucket: bucket, MaxBytes: per*runs/4 + 1}
	for i := range 50 {
		var id format.StreamID
		binary.BigEndian.PutUint64(id[:], uint64(i*397%streams))
		before := w.Stats()
		got, err := w.HeadRefs(t.Context(), chainX, h, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		st := w.Stats()
		if i > 0 { // the first lookup fills the cache with whole objects
			// With command state, each object's command table too (a
			// fifth of the streams have some here).
			if fetched := st.GetBytes - before.GetBytes + st.RangedBytes - before.RangedBytes; fetched > window/8 {
				t.Fatalf("lookup %d fetched %d bytes (%d whole objects, %d by range), the window is %d", i, fetched, st.Gets-before.Gets, st.Ranged-before.Ranged, window)
			}
			if st.Ranged-before.Ranged != runs-int64(st.Objects) {
				t.Fatalf("lookup %d read %d objects by range, %d cached of %d", i, st.Ranged-before.Ranged, st.Objects, runs)
			}
		}
		if st.Bytes > w.MaxBytes {
			t.Fatalf("cache holds %d bytes, budget %d", st.Bytes, w.MaxBytes)
		}
		want, err := ref.HeadRefs(t.Context(), chainX, h, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != runs || !reflect.DeepEqual(got, want) {
			t.Fatalf("stream %d: %d parts, differ from the unbounded window's %d", i, len(got), len(want))
		}
		before = w.Stats()
		last, ok, err := w.HeadLastRef(t.Context(), chainX, h, id)
		if err != nil || !ok || !reflect.DeepEqual(last, want[len(want)-1]) || last.Commands == nil != (i*397%streams%5 != 0) {
			t.Fatalf("stream %d: last part %+v, %v, %v; want %+v", i, last, ok, err, want[len(want)-1])
		}
		st = w.Stats()
		if fetched := st.GetBytes - before.GetBytes + st.RangedBytes - before.RangedBytes; fetched > window/16 {
			t.Fatalf("last part of %d fetched %d bytes (%d whole objects, %d by range), the window is %d", i, fetched, st.Gets-before.Gets, st.Ranged-before.Ranged, window)
		}
		before = w.Stats()
		parts, err := w.HeadParts(t.Context(), chainX, h, id, 0)
		if err != nil || len(parts) != runs {
			t.Fatalf("stream %d: %d parts without commands, %v", i, len(parts), err)
		}
		st = w.Stats()
		if fetched := st.GetBytes - before.GetBytes + st.RangedBytes - before.RangedBytes; fetched > window/16 {
			t.Fatalf("lookup %d without commands fetched %d bytes (%d whole objects, %d by range), the window is %d", i, fetched, st.Gets-before.Gets, st.Ranged-before.Ranged, window)
		}
		for j := range parts {
			want[j].Commands = nil
		}
		if !reflect.DeepEqual(parts, want) {
			t.Fatalf("stream %d: parts without commands differ", i)
		}
	}
}

// FuzzFindRanged: the ranged search over any object never panics or
// loops, and on an object ParsePassIndex accepts it finds what FindAll
// finds.
func FuzzFindRanged(f *testing.F) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 3, 40} {
		p := randomRun(rng, n, n%3, true, true)
		if obj, err := format.AppendPassIndex(nil, p); err == nil {
			var id []byte
			if n > 0 {
				id = p.Streams[n/2].Stream[:]
			}
			f.Add(obj, id)
		}
	}
	f.Fuzz(func(t *testing.T, obj, idb []byte) {
		var id format.StreamID
		copy(id[:], idb)
		bucket := objstore.NewMem("settled")
		if err := bucket.PutIfAbsent(t.Context(), "run", obj); err != nil {
			t.Fatal(err)
		}
		got, err := passindex.FindRanged(t.Context(), bucket, "run", id, true)
		whole, werr := format.ParsePassIndex(obj)
		if werr != nil {
			return
		}
		if err != nil {
			t.Fatalf("ranged: %v, the object parses whole", err)
		}
		if want := whole.FindAll(id); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("ranged %+v, whole %+v", got, want)
		}
	})
}

// withCarried gives every fifth packed entry of p a carried table (ADR
// 0062): p is then a version 3 object.
func withCarried(p format.PassIndex) format.PassIndex {
	for i := range p.Streams {
		if s := &p.Streams[i]; !s.Marker() && i%5 == 0 && s.FirstSeq > 0 {
			s.Carried = []format.PassMark{{Producer: format.ProducerID{9}, BatchSeq: uint64(i), FirstSeq: 0, LastSeq: s.FirstSeq - 1}}
			s.CarriedBelow = s.FirstSeq
		}
	}
	return p
}
