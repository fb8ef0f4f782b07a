package settle

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// flushBenchWindow is a window of `runs` level-1 runs over `streams`
// streams (random ids), every stream in every run with one segment of
// one record, one in cmdEvery with command state (version 2 runs), no
// marks;
// written to an in-memory bucket (with their command indexes, as settle
// writes them), with its unflushed state (every stream
// unflushed back to the first run).
func flushBenchWindow(b *testing.B, streams, runs, cmdEvery int) (objstore.Bucket, *chainState, []format.StreamID, int64) {
	b.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(streams), uint64(runs)))
	ids := randomStreamIDs(rng, streams)
	bucket := objstore.NewMem("settled")
	end := metastore.Cursor{Epoch: 1, Slot: uint64(runs)}
	cs := newChainState(stateKey{flushed: metastore.Cursor{Epoch: 1}, merged: metastore.Cursor{Epoch: 1}, settled: end})
	var total int64
	run := &format.PassIndex{Epoch: 1, Streams: make([]format.PassStream, len(ids))}
	segs := make([]format.PassSegment, len(ids))
	cmds := &format.StreamCommands{FenceToken: "fence-token-0123456789", TrimSeq: 1}
	for r := range runs {
		run.FirstSlot, run.EndSlot = uint64(r), uint64(r+1)
		for i, id := range ids {
			seq := uint64(r)
			segs[i] = format.PassSegment{Slot: uint64(r), FirstSeq: seq, Count: 1, Offset: uint32(64 * i), Length: 164, CRC: uint32(i)}
			e := format.PassStream{Stream: id, FirstSeq: seq, LastSeq: seq, FirstTsMs: int64(r), LastTsMs: int64(r), Bytes: 100, Segments: segs[i : i+1 : i+1]}
			if i%cmdEvery == 0 {
				e.Commands = cmds
			}
			run.Streams[i] = e
		}
		obj, err := format.AppendPassIndex(nil, *run)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(len(obj))
		key := format.RunIndexKey(chainF.Star, chainF.Class.String(), 1, run.FirstSlot)
		if err := bucket.PutIfAbsent(ctx, key, obj); err != nil {
			b.Fatal(err)
		}
		// Its command index, as settle writes it (design 014, "The
		// command index"; not counted in the runs' MB).
		if err := (&Settler{Settled: bucket}).putCommandIndex(ctx, key, obj); err != nil {
			b.Fatal(err)
		}
		cs.fold(run)
	}
	return bucket, cs, ids, total
}

// BenchmarkFlushPastBudget measures a settle step's reads of its flushed
// streams' unflushed entries (issue 17, "Flushes past the window
// budget"): `flushed` streams, each with entries in every one of the 24
// live runs, at `streams` streams per run, 1% or all of them with
// command state in every entry (the window's runs not cached:
// a cold window with a 4 MiB budget, smaller than one run), by the walk
// of the live runs (every run fetched whole) and by per-stream lookups
// (ranged past the budget). It reports the GETs and the bytes they
// fetched (whole and ranged), and the runs' total size. The 1,000,000
// streams case (2.5 GB of runs in memory) runs with STRAND_BENCH_1M=1:
//
//	go test ./shared/settle -run '^$' -bench FlushPastBudget -benchtime 1x
func BenchmarkFlushPastBudget(b *testing.B) {
	sizes := []int{100_000}
	if os.Getenv("STRAND_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	const runs = 24
	for _, streams := range sizes {
		for _, cmdEvery := range []int{100, 1} {
			bucket, cs, ids, total := flushBenchWindow(b, streams, runs, cmdEvery)
			perm := rand.New(rand.NewPCG(1, 1)).Perm(len(ids))
			for _, flushed := range []int{1, 10, 100, 1000} {
				want := make([]format.StreamID, flushed)
				for i := range want {
					want[i] = ids[perm[i]]
				}
				slices.SortFunc(want, func(a, b format.StreamID) int { return bytes.Compare(a[:], b[:]) })
				for _, path := range []flushPath{flushWalk, flushRanged} {
					name := map[flushPath]string{flushWalk: "walk", flushRanged: "ranged"}[path]
					b.Run(fmt.Sprintf("streams=%d/runs=%d/commands=%d%%/flushed=%d/%s", streams, runs, 100/cmdEvery, flushed, name), func(b *testing.B) {
						var gets, got int64
						for b.Loop() {
							fw := &flushWindow{bucket: bucket}
							s := fw.settler(4<<20, path)
							out, err := s.unflushedRefs(b.Context(), chainF, cs, want)
							if err != nil {
								b.Fatal(err)
							}
							if len(out) != flushed || len(out[want[0]]) != runs {
								b.Fatalf("%d streams with entries, the first with %d: want %d, %d", len(out), len(out[want[0]]), flushed, runs)
							}
							st := s.window.Stats()
							gets += st.Gets + st.RangedGets
							got += st.GetBytes + st.RangedBytes
						}
						b.ReportMetric(float64(gets)/float64(b.N), "GETs/op")
						b.ReportMetric(float64(got)/float64(b.N)/1e6, "MB/op")
						b.ReportMetric(float64(total)/1e6, "runs-MB")
					})
				}
			}
		}
	}
}
