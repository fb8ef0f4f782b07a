package passindex_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// BenchmarkWindowMemory measures what a process caching the window holds
// (design 014, levels 1 and 2): `runs` merged runs of `streams`
// single-segment entries each (what a merged run of an hour holds at
// that many streams, or a level-1 run where every stream was touched),
// walked cold by Window.HeadRuns from a memory bucket. It reports
// the live heap per cached entry after a GC, the encoded bytes per entry
// (the run objects' size) and the cold load time per run (one GET and a
// decode; the walk is sequential), and DecodedBytes's estimate per entry
// (what Window.MaxBytes counts) beside the measured heap.
//
//	go test ./shared/passindex -run '^$' -bench WindowMemory -benchtime 1x
func BenchmarkWindowMemory(b *testing.B) {
	for _, streams := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			const runs = 4
			c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
			meta := metastore.NewMem()
			if err := meta.MintEpoch(b.Context(), c, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
				b.Fatal(err)
			}
			bucket := objstore.NewMem("settled")
			var encoded int64
			for r := range runs {
				run := format.PassIndex{Epoch: 1, FirstSlot: uint64(r * 60), EndSlot: uint64(r*60 + 60)}
				run.Streams = make([]format.PassStream, streams)
				for i := range run.Streams {
					var id format.StreamID
					binary.BigEndian.PutUint64(id[:], uint64(i))
					seq := uint64(r * 100)
					run.Streams[i] = format.PassStream{Stream: id, FirstSeq: seq, LastSeq: seq + 59, FirstTsMs: 1, LastTsMs: 2, Bytes: 6000,
						Segments: []format.PassSegment{{Slot: run.FirstSlot, FirstSeq: seq, Count: 60, Offset: uint32(i * 100), Length: 6036}}}
				}
				obj, err := format.AppendPassIndex(nil, run)
				if err != nil {
					b.Fatal(err)
				}
				encoded += int64(len(obj))
				if err := bucket.PutIfAbsent(b.Context(), format.MergedRunKey(c.Star, c.Class.String(), 1, run.FirstSlot), obj); err != nil {
					b.Fatal(err)
				}
			}
			h := metastore.Head{Epoch: 1, Flushed: metastore.Cursor{Epoch: 1}, Merged: metastore.Cursor{Epoch: 1, Slot: runs * 60},
				Settled: metastore.Cursor{Epoch: 1, Slot: runs * 60}, Checkpoint: metastore.Cursor{Epoch: 1, Slot: runs * 60}}
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				w := &passindex.Window{Meta: meta, Bucket: bucket, MaxBytes: -1} // the whole window
				start := time.Now()
				got, err := w.HeadRuns(b.Context(), c, h)
				took := time.Since(start)
				if err != nil || len(got) != runs {
					b.Fatalf("%d runs, %v", len(got), err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				entries := float64(runs * streams)
				b.ReportMetric(float64(w.Stats().Bytes)/entries, "estimate-B/entry") // passindex.DecodedBytes
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/entries, "heap-B/entry")
				b.ReportMetric(float64(encoded)/entries, "encoded-B/entry")
				b.ReportMetric(float64(took.Milliseconds())/runs, "load-ms/run")
				runtime.KeepAlive(w)
			}
		})
	}
}

// BenchmarkWindowLookup measures what a window cache smaller than the
// window costs a per-stream lookup (Window.HeadRefs of one stream,
// every part with command state; HeadLastRef, the last part with it, as a
// tail recovery reads it; HeadParts, without, as a read by seq or the
// probe makes): a window of `runs` merged runs of
// `streams` entries each (windowOfRunsIDs: every third stream with a
// producer mark, every fifth with command state), stream ids random (as
// the server draws them) or clustered (small integers: the worst case
// for the interpolation search short of identical prefixes), cache
// budgets of a quarter and a half of the window, from a memory bucket
// (GET latency not counted: ns/op is CPU, decode included). It reports,
// per lookup once warm, the GETs (whole and ranged) and the KiB they
// fetched, the decoded MiB cached and the encoded MiB per run.
//
//	go test ./shared/passindex -run '^$' -bench WindowLookup -benchtime 20x
func BenchmarkWindowLookup(b *testing.B) {
	for _, tc := range []struct {
		streams, runs int
		ids           string
		cmdEvery      int // one stream in cmdEvery with command state
	}{
		{10_000, 24, "random", 5}, {10_000, 24, "clustered", 5},
		{100_000, 24, "random", 5}, {100_000, 24, "clustered", 5},
		{1_000_000, 8, "random", 5},
		{100_000, 24, "random", 1}, {1_000_000, 8, "random", 1},
	} {
		idOf := randomID
		if tc.ids == "clustered" {
			idOf = clusteredID
		}
		name := fmt.Sprintf("streams=%d/runs=%d/ids=%s", tc.streams, tc.runs, tc.ids)
		if tc.cmdEvery != 5 {
			name += fmt.Sprintf("/commands=%d%%", 100/tc.cmdEvery)
		}
		if !benchSelected(b, name) {
			continue
		}
		meta, mem, h, all := windowOfRunsCmds(b, tc.runs, tc.streams, idOf, tc.cmdEvery)
		per := passindex.DecodedBytes(&all[0])
		all = nil
		size, err := mem.Head(b.Context(), format.MergedRunKey(chainX.Star, chainX.Class.String(), 1, 0))
		if err != nil {
			b.Fatal(err)
		}
		for _, frac := range []int{4, 2} { // budget: the window / frac
			for _, lookup := range []string{"refs", "last", "parts"} {
				b.Run(fmt.Sprintf("%s/budget=window÷%d/lookup=%s", name, frac, lookup), func(b *testing.B) {
					bucket := &countingBucket{Bucket: mem}
					w := &passindex.Window{Meta: meta, Bucket: bucket, MaxBytes: per*int64(tc.runs)/int64(frac) + 1}
					look := w.HeadRefs
					switch lookup {
					case "parts":
						look = w.HeadParts
					case "last":
						look = func(ctx context.Context, c metastore.ChainID, h metastore.Head, id format.StreamID, _ uint64) ([]metastore.Ref, error) {
							_, _, err := w.HeadLastRef(ctx, c, h, id)
							return nil, err
						}
					}
					for i := range 4 { // warm: the cache filled, headers read
						if _, err := look(b.Context(), chainX, h, idOf(i), 0); err != nil {
							b.Fatal(err)
						}
					}
					gets, bytes := bucket.gets.Load(), bucket.bytes.Load()
					i := 0
					for b.Loop() {
						i++
						if _, err := look(b.Context(), chainX, h, idOf(i*7919%tc.streams), 0); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(bucket.gets.Load()-gets)/float64(b.N), "GETs/lookup")
					b.ReportMetric(float64(bucket.bytes.Load()-bytes)/float64(b.N)/1024, "KiB/lookup")
					b.ReportMetric(float64(w.Stats().Bytes)/(1<<20), "cached-MiB")
					b.ReportMetric(float64(size)/(1<<20), "MiB/run")
				})
			}
		}
	}
}

// benchSelected reports whether -test.bench may select a sub-benchmark
// under prefix (its window is built only then): a filter's second
// element onwards matched against the prefix's, as far as both go.
func benchSelected(b *testing.B, prefix string) bool {
	f := flag.Lookup("test.bench")
	if f == nil {
		return true
	}
	parts := strings.Split(f.Value.String(), "/")
	names := strings.Split(prefix, "/")
	for i := 1; i < len(parts) && i-1 < len(names); i++ {
		re, err := regexp.Compile(parts[i])
		if err != nil || !re.MatchString(names[i-1]) {
			return err != nil
		}
	}
	return true
}

// clusteredID is stream i's id in windowOfRuns: i in its first 8 bytes
// (the ids cluster at the low end of the id space).
func clusteredID(i int) format.StreamID {
	var id format.StreamID
	binary.BigEndian.PutUint64(id[:], uint64(i))
	return id
}

// randomID is stream i's id in a window of random ids, as the server
// draws them: distinct, spread uniformly over the id space (splitmix64
// of i, a bijection).
func randomID(i int) format.StreamID {
	z := uint64(i) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	var id format.StreamID
	binary.BigEndian.PutUint64(id[:8], z)
	binary.BigEndian.PutUint64(id[8:], uint64(i))
	return id
}

// windowOfRunsIDs is windowOfRuns with stream i's id idOf(i).
func windowOfRunsIDs(t testing.TB, runs, streams int, idOf func(int) format.StreamID) (metastore.Store, objstore.Bucket, metastore.Head, []format.PassIndex) {
	t.Helper()
	return windowOfRunsCmds(t, runs, streams, idOf, 5)
}

// windowOfRunsCmds is windowOfRunsIDs with one stream in cmdEvery with
// command state (windowOfRunsIDs: every fifth). Each run's command index
// is written as settle writes it (putCommandIndex).
func windowOfRunsCmds(t testing.TB, runs, streams int, idOf func(int) format.StreamID, cmdEvery int) (metastore.Store, objstore.Bucket, metastore.Head, []format.PassIndex) {
	t.Helper()
	meta := metastore.NewMem()
	if err := meta.MintEpoch(t.Context(), chainX, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
		t.Fatal(err)
	}
	bucket := objstore.NewMem("settled")
	var all []format.PassIndex
	for r := range runs {
		run := format.PassIndex{Epoch: 1, FirstSlot: uint64(r * 60), EndSlot: uint64(r*60 + 60)}
		run.Streams = make([]format.PassStream, streams)
		for i := range run.Streams {
			id := idOf(i)
			seq := uint64(r * 100)
			s := format.PassStream{Stream: id, FirstSeq: seq, LastSeq: seq + 59, FirstTsMs: 1, LastTsMs: 2, Bytes: 6000,
				Segments: []format.PassSegment{{Slot: run.FirstSlot, FirstSeq: seq, Count: 60, Offset: uint32(i * 100), Length: 6036}}}
			if i%3 == 0 {
				s.Marks = []format.PassMark{{Producer: format.ProducerID{1, byte(i)}, BatchSeq: seq, FirstSeq: seq, LastSeq: seq + 59}}
			}
			if i%cmdEvery == 0 {
				s.Commands = &format.StreamCommands{FenceToken: "token", TrimSeq: 1}
			}
			run.Streams[i] = s
		}
		slices.SortFunc(run.Streams, func(a, b format.PassStream) int { return bytes.Compare(a.Stream[:], b.Stream[:]) })
		obj, err := format.AppendPassIndex(nil, run)
		if err != nil {
			t.Fatal(err)
		}
		key := format.MergedRunKey(chainX.Star, chainX.Class.String(), 1, run.FirstSlot)
		if err := bucket.PutIfAbsent(t.Context(), key, obj); err != nil {
			t.Fatal(err)
		}
		putCommandIndex(t, bucket, key, obj)
		run.Merged = true
		all = append(all, run)
	}
	end := metastore.Cursor{Epoch: 1, Slot: uint64(runs * 60)}
	h := metastore.Head{Epoch: 1, Flushed: metastore.Cursor{Epoch: 1}, Merged: end, Settled: end, Checkpoint: end, Indexed: metastore.Cursor{Epoch: 1}}
	return meta, bucket, h, all
}

// putCommandIndex writes the command index of the run obj at key as
// settle writes it (design 014, "The command index"): for a version 2
// run whose command table is larger than passindex.CommandIndexMinTable.
func putCommandIndex(t testing.TB, b objstore.Bucket, key string, obj []byte) {
	t.Helper()
	h, err := format.ParsePassHeader(obj)
	if err != nil || h.Version != format.PassIndexVersionCommands || int64(len(obj))-4-h.CommandsAt() <= passindex.CommandIndexMinTable {
		return
	}
	cmdx, err := format.AppendCommandIndex(nil, obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutIfAbsent(t.Context(), format.CommandIndexKey(key), cmdx); err != nil {
		t.Fatal(err)
	}
}

// countingBucket counts GETs and the bytes they return (ranged lookups
// run in parallel).
type countingBucket struct {
	objstore.Bucket
	gets, bytes atomic.Int64
}

func (b *countingBucket) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	got, err := b.Bucket.Get(ctx, key, off, n)
	b.gets.Add(1)
	b.bytes.Add(int64(len(got)))
	return got, err
}
