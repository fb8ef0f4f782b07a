package settle

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// BenchmarkStepPeakHeap measures the peak heap of the part of a settle
// step on the pass index that held the most at once before issue 17's
// kept state (design 014, "Window memory bound"; the step now keeps the
// unflushed state instead: BenchmarkStepState): the live runs [flushed,
// settled) walked by passindex.Window.HeadRuns and held together for
// unflushedOf (still the test switch Settler.scratch's path). The window is
// `merged` merged runs and `runs` level-1 runs, every one of `streams`
// streams in each with one segment (a window at the 24 h FlushAge with
// Fanout 60, hourly merges: 23 merged runs and up to 60 level-1 runs),
// read cold from a memory bucket through a window whose cache budget is
// passindex.DefaultWindowCacheBytes (the step pins what it walks whatever
// the budget). It reports the peak heap above the baseline (the bucket's
// encoded objects), sampled every millisecond, and per entry.
//
//	go test ./shared/settle -run '^$' -bench StepPeakHeap -benchtime 1x
func BenchmarkStepPeakHeap(b *testing.B) {
	for _, tc := range []struct{ streams, merged, runs int }{{10_000, 23, 60}, {100_000, 23, 60}} {
		b.Run(fmt.Sprintf("streams=%d/merged=%d/runs=%d", tc.streams, tc.merged, tc.runs), func(b *testing.B) {
			ctx := b.Context()
			c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
			meta := metastore.NewMem()
			if err := meta.MintEpoch(ctx, c, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
				b.Fatal(err)
			}
			settled := objstore.NewMem("settled")
			total := tc.merged + tc.runs
			for r := range total {
				run := format.PassIndex{Epoch: 1, FirstSlot: uint64(r), EndSlot: uint64(r + 1), Streams: make([]format.PassStream, tc.streams)}
				segs := make([]format.PassSegment, tc.streams)
				for i := range run.Streams {
					binary.BigEndian.PutUint64(run.Streams[i].Stream[:], uint64(i))
					segs[i] = format.PassSegment{Slot: run.FirstSlot, FirstSeq: uint64(r), Count: 1, Offset: uint32(i * 137), Length: 137}
					run.Streams[i].FirstSeq, run.Streams[i].LastSeq, run.Streams[i].Bytes = uint64(r), uint64(r), 101
					run.Streams[i].Segments = segs[i : i+1 : i+1]
				}
				obj, err := format.AppendPassIndex(nil, run)
				if err != nil {
					b.Fatal(err)
				}
				key := format.RunIndexKey(c.Star, c.Class.String(), 1, run.FirstSlot)
				if r < tc.merged {
					key = format.MergedRunKey(c.Star, c.Class.String(), 1, run.FirstSlot)
				}
				if err := settled.PutIfAbsent(ctx, key, obj); err != nil {
					b.Fatal(err)
				}
			}
			h := metastore.Head{Epoch: 1, Flushed: metastore.Cursor{Epoch: 1}, Merged: metastore.Cursor{Epoch: 1, Slot: uint64(tc.merged)},
				Settled: metastore.Cursor{Epoch: 1, Slot: uint64(total)}}
			for b.Loop() {
				w := &passindex.Window{Meta: meta, Bucket: settled, Parallel: passindex.DefaultColdLoadParallel}
				runtime.GC()
				base := heapObjects()
				stop := peakOf()
				start := time.Now()
				runs, err := w.HeadRuns(ctx, c, h)
				if err != nil || len(runs) != total {
					b.Fatalf("%d runs, %v", len(runs), err)
				}
				state, _ := unflushedOf(c, runs)
				took := time.Since(start)
				peak := stop()
				runtime.KeepAlive(runs)
				runtime.KeepAlive(state)
				entries := float64(tc.streams * total)
				b.ReportMetric(float64(peak-base)/(1<<20), "peak-MiB")
				b.ReportMetric(float64(peak-base)/entries, "peak-B/entry")
				b.ReportMetric(took.Seconds(), "s/step")
			}
		})
	}
}

// peakOf samples heapObjects every millisecond until the returned stop
// is called; stop returns the largest value seen, its own read included.
func peakOf() (stop func() uint64) {
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, heapObjects())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return max(peak, heapObjects())
	}
}

// heapObjects is the live and not yet swept heap objects' bytes.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
