package absorb_test

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// BenchmarkWindowMemory measures what a process caching the window holds
// (design 014, levels 1 and 2): `runs` merged runs of `streams`
// single-segment entries each (what a merged run of an hour holds at
// that many streams, or a level-1 run where every stream was touched),
// walked cold by IndexWindow.HeadRuns from a memory bucket. It reports
// the live heap per cached entry after a GC, the encoded bytes per entry
// (the run objects' size) and the cold load time per run (one GET and a
// decode; the walk is sequential), and DecodedBytes's estimate per entry
// (what IndexWindow.MaxBytes counts) beside the measured heap.
//
//	go test ./shared/absorb -run '^$' -bench WindowMemory -benchtime 1x
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
				w := &absorb.IndexWindow{Meta: meta, Bucket: bucket, MaxBytes: -1} // the whole window
				start := time.Now()
				got, err := w.HeadRuns(b.Context(), c, h)
				took := time.Since(start)
				if err != nil || len(got) != runs {
					b.Fatalf("%d runs, %v", len(got), err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				entries := float64(runs * streams)
				b.ReportMetric(float64(w.Stats().Bytes)/entries, "estimate-B/entry") // absorb.DecodedBytes
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/entries, "heap-B/entry")
				b.ReportMetric(float64(encoded)/entries, "encoded-B/entry")
				b.ReportMetric(float64(took.Milliseconds())/runs, "load-ms/run")
				runtime.KeepAlive(w)
			}
		})
	}
}

// BenchmarkWindowLookup measures what a window cache smaller than the
// window costs a lookup (IndexWindow.HeadRefs of one stream, as a read or
// a tail recovery makes): a window of `runs` merged runs of `streams`
// entries each (windowOfRuns), cache budgets from the whole window down
// to a quarter of it, from a memory bucket (GET latency not counted). It
// reports the GETs per lookup once warm, the decoded bytes cached, and
// the time per lookup (the refetched objects' decode).
//
//	go test ./shared/absorb -run '^$' -bench WindowLookup -benchtime 20x
func BenchmarkWindowLookup(b *testing.B) {
	const runs, streams = 24, 100_000
	meta, bucket, h, all := windowOfRuns(b, runs, streams)
	per := absorb.DecodedBytes(&all[0])
	all = nil
	for _, frac := range []int{4, 2, 1} { // budget: the window / frac
		b.Run(fmt.Sprintf("streams=%d/runs=%d/budget=window÷%d", streams, runs, frac), func(b *testing.B) {
			w := &absorb.IndexWindow{Meta: meta, Bucket: bucket, MaxBytes: per*runs/int64(frac) + 1}
			id := func(i int) format.StreamID {
				var id format.StreamID
				binary.BigEndian.PutUint64(id[:], uint64(i%streams))
				return id
			}
			if _, err := w.HeadRefs(b.Context(), chainX, h, id(0), 0); err != nil { // warm
				b.Fatal(err)
			}
			before := w.Stats().Gets
			i := 0
			for b.Loop() {
				i++
				if _, err := w.HeadRefs(b.Context(), chainX, h, id(i*7919), 0); err != nil {
					b.Fatal(err)
				}
			}
			st := w.Stats()
			b.ReportMetric(float64(st.Gets-before)/float64(b.N), "GETs/lookup")
			b.ReportMetric(float64(st.Bytes)/(1<<20), "cached-MiB")
			b.ReportMetric(float64(per)/(1<<20), "MiB/run")
		})
	}
}
