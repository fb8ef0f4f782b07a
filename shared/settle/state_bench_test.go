package settle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore/dir"
	"github.com/strandlog/strand/shared/passindex"
)

// BenchmarkStepState measures the unflushed-state work of one settle step
// on the pass index (issue 17): everything a step does besides its I/O
// (pack copies, flushes), at `streams` active streams, each in every one
// of the window's 23 merged and 60 level-1 runs with one segment (the
// window at the 24 h FlushAge, Fanout 60, a one-minute settle; as
// BenchmarkStepPeakHeap, but in a directory bucket), and each in the
// step's one pass, none flushed (4 MiB, 24 h: the steady state). Modes:
//
//   - held-cold: the step before issue 17: the live runs walked and held
//     at once (passindex.Window.HeadRuns, a cold window with the default
//     budget), unflushedOf, the decision;
//   - held-warm: the same with every run already decoded in an unbounded
//     window cache (no GET, no decode: the best case of the old step);
//   - rebuild: the state rebuilt by streaming the runs (buildState: a
//     cold settler, or a copy moved the head) through a cold window
//     with the default budget and the cold load (LIST and 16 GETs in
//     flight), the decision;
//   - rebuild-serial: the same without the cold load (one GET at a time:
//     a role without the List grant);
//   - kept: the step on the state kept from the last step: the decision,
//     the new run folded in, the flushed cursor, the runs below it
//     dropped;
//   - kept-1pct: the same with 1% of the streams in the step's pass (the
//     others idle: none FlushAge old), so that the step's own work is
//     small beside the state's;
//   - flush: what the kept state leaves to the window: the unflushed
//     entries of the step's flushed streams (unflushedRefs), here 1% of
//     the streams, each with entries back to the window's first run, so
//     the walk visits every run, through a warm window with the default
//     budget (64 MiB: most runs are fetched and decoded again).
//
// It reports the wall time of one step (s/step), the process's CPU time
// over it (cpu-s/step: the step, the collector, the heap sampler) and the
// heap's peak above what was live before it (for kept: above the state;
// live and not yet swept objects, sampled every millisecond), and the kept
// state's size (state-MiB). The 1,000,000 streams case runs kept and
// kept-1pct only
// (the other modes would hold 17 GB of decoded runs or write 8.6 GB of
// them), with STRAND_BENCH_1M=1:
//
//	go test ./shared/settle -run '^$' -bench StepState -benchtime 3x
func BenchmarkStepState(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if os.Getenv("STRAND_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	const merged, level1 = 23, 60
	for _, streams := range sizes {
		for _, mode := range []string{"held-cold", "held-warm", "rebuild", "rebuild-serial", "kept", "kept-1pct", "flush"} {
			if streams > 100_000 && !strings.HasPrefix(mode, "kept") {
				continue
			}
			b.Run(fmt.Sprintf("streams=%d/mode=%s", streams, mode), func(b *testing.B) {
				benchStepState(b, streams, merged, level1, mode)
			})
		}
	}
}

// benchRun is run r of the bench window: every stream, one segment.
func benchRun(streams, r int, merged bool) *format.PassIndex {
	run := &format.PassIndex{Epoch: 1, FirstSlot: uint64(r), EndSlot: uint64(r + 1), Merged: merged, Streams: make([]format.PassStream, streams)}
	segs := make([]format.PassSegment, streams)
	for i := range run.Streams {
		binary.BigEndian.PutUint64(run.Streams[i].Stream[:], uint64(i))
		segs[i] = format.PassSegment{Slot: run.FirstSlot, FirstSeq: uint64(r), Count: 1, Offset: uint32(i * 137), Length: 137}
		run.Streams[i].FirstSeq, run.Streams[i].LastSeq, run.Streams[i].Bytes = uint64(r), uint64(r), 101
		run.Streams[i].Segments = segs[i : i+1 : i+1]
	}
	return run
}

func benchStepState(b *testing.B, streams, merged, level1 int, mode string) {
	ctx := b.Context()
	c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	meta := metastore.NewMem()
	if err := meta.MintEpoch(ctx, c, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
		b.Fatal(err)
	}
	total := merged + level1
	key := stateKey{flushed: metastore.Cursor{Epoch: 1}, merged: metastore.Cursor{Epoch: 1, Slot: uint64(merged)}, settled: metastore.Cursor{Epoch: 1, Slot: uint64(total)}}
	// A directory bucket: the window's objects are not on the heap, so
	// the collector paces on the step's own heap as in a Lambda.
	settled, err := dir.Open(b.TempDir(), "settled")
	if err != nil {
		b.Fatal(err)
	}
	var kept *chainState
	var stateMiB float64
	if strings.HasPrefix(mode, "kept") {
		runtime.GC()
		before := heapObjects()
		kept = newChainState(key)
		for r := range total {
			kept.fold(benchRun(streams, r, r < merged))
		}
		runtime.GC()
		stateMiB = float64(heapObjects()-min(before, heapObjects())) / (1 << 20)
	} else {
		for r := range total {
			run := benchRun(streams, r, r < merged)
			obj, err := format.AppendPassIndex(nil, *run)
			if err != nil {
				b.Fatal(err)
			}
			k := format.RunIndexKey(c.Star, c.Class.String(), 1, run.FirstSlot)
			if r < merged {
				k = format.MergedRunKey(c.Star, c.Class.String(), 1, run.FirstSlot)
			}
			if err := settled.PutIfAbsent(ctx, k, obj); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The step: one pass at the settled cursor with every stream.
	pass := benchRun(streams, total, false)
	if mode == "kept-1pct" {
		pass.Streams = slices.DeleteFunc(pass.Streams, func(e format.PassStream) bool { return binary.BigEndian.Uint64(e.Stream[:])%100 != 0 })
	}
	step := make(map[format.StreamID]*stepPart, streams)
	for i := range pass.Streams {
		ps := &pass.Streams[i]
		step[ps.Stream] = &stepPart{refs: []metastore.Ref{passindex.PassRef(c.Star, 1, ps)}, raw: []*format.PassStream{ps}}
	}
	passes := []*format.PassIndex{pass}
	s := &Settler{Meta: meta, Settled: settled}
	var warm *passindex.Window
	var flushIDs []format.StreamID
	var flushState *chainState
	switch mode {
	case "flush":
		warm = &passindex.Window{Meta: meta, Bucket: settled}
		flushState = newChainState(key)
		for r := range total {
			flushState.fold(benchRun(streams, r, r < merged))
		}
		for i := 0; i < streams; i += 100 {
			var id format.StreamID
			binary.BigEndian.PutUint64(id[:], uint64(i))
			flushIDs = append(flushIDs, id)
		}
		s.window = warm
		if _, err := s.unflushedRefs(ctx, c, flushState, flushIDs); err != nil {
			b.Fatal(err)
		}
	case "held-warm":
		warm = &passindex.Window{Meta: meta, Bucket: settled, MaxBytes: -1}
		if _, err := warm.HeadRuns(ctx, c, metastore.Head{Flushed: key.flushed, Merged: key.merged, Settled: key.settled}); err != nil {
			b.Fatal(err)
		}
	}
	var took, cpu time.Duration
	var peakMiB float64
	n := 0
	for b.Loop() {
		switch mode {
		case "held-warm", "flush":
			s.window = warm
		case "kept", "kept-1pct":
			// Each iteration is the next step: the kept state at its key.
			key = kept.key
		case "rebuild-serial":
			s.window = &passindex.Window{Meta: meta, Bucket: settled}
		default:
			s.window = &passindex.Window{Meta: meta, Bucket: settled, Parallel: passindex.DefaultColdLoadParallel}
		}
		runtime.GC()
		base := heapObjects()
		stop := peakOf()
		start, startCPU := time.Now(), cpuTime()
		if mode == "flush" {
			refs, err := s.unflushedRefs(ctx, c, flushState, flushIDs)
			if err != nil || len(refs) != len(flushIDs) || len(refs[flushIDs[0]]) != total {
				b.Fatalf("%d streams' entries, %v", len(refs), err)
			}
			took += time.Since(start)
			cpu += cpuTime() - startCPU
			peak := stop()
			peakMiB = max(peakMiB, float64(peak-min(peak, base))/(1<<20))
			n++
			continue
		}
		var cs *chainState
		var err error
		switch mode {
		case "held-cold", "held-warm":
			cs, _, err = s.scratchState(ctx, c, key)
		case "rebuild", "rebuild-serial":
			cs, err = s.buildState(ctx, c, key)
		case "kept", "kept-1pct":
			cs = kept
		}
		if err != nil {
			b.Fatal(err)
		}
		markers, packed := s.decide(passes, cs, step)
		if len(markers) != 0 || len(packed) != len(pass.Streams) {
			b.Fatalf("%d markers, %d packed", len(markers), len(packed))
		}
		if kept != nil {
			plan := benchPlan(cs.key.settled, packed)
			to := metastore.Cursor{Epoch: plan.Epoch, Slot: plan.EndSlot}
			cs.fold(plan)
			newFlushed := cs.firstHeld(to)
			if err := cs.dropBelow(newFlushed); err != nil {
				b.Fatal(err)
			}
			cs.key = stateKey{flushed: newFlushed, merged: cs.key.merged, settled: to}
		}
		took += time.Since(start)
		cpu += cpuTime() - startCPU
		peak := stop()
		runtime.KeepAlive(cs)
		peakMiB = max(peakMiB, float64(peak-min(peak, base))/(1<<20))
		n++
	}
	b.ReportMetric(took.Seconds()/float64(n), "s/step")
	b.ReportMetric(cpu.Seconds()/float64(n), "cpu-s/step")
	b.ReportMetric(peakMiB, "peak-MiB")
	if kept != nil {
		b.ReportMetric(stateMiB, "state-MiB")
	}
}

// cpuTime is the process's user and system CPU time so far (all threads:
// the step, the collector, the heap sampler).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPlan is the run a step at `from` writes when it packs every
// stream of ids (sorted) with one segment.
func benchPlan(from metastore.Cursor, ids []format.StreamID) *format.PassIndex {
	plan := &format.PassIndex{Epoch: from.Epoch, FirstSlot: from.Slot, EndSlot: from.Slot + 1, Streams: make([]format.PassStream, len(ids))}
	segs := make([]format.PassSegment, len(ids))
	for i, id := range ids {
		segs[i] = format.PassSegment{Slot: from.Slot, FirstSeq: from.Slot, Count: 1, Offset: uint32(i * 137), Length: 137}
		plan.Streams[i] = format.PassStream{Stream: id, FirstSeq: from.Slot, LastSeq: from.Slot, Bytes: 101, Segments: segs[i : i+1 : i+1]}
	}
	if !slices.IsSortedFunc(plan.Streams, func(a, b format.PassStream) int { return bytes.Compare(a.Stream[:], b.Stream[:]) }) {
		panic("bench plan not sorted")
	}
	return plan
}
