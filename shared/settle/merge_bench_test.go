package settle

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// BenchmarkMerge measures one merge (design 014, level 2) of `runs`
// level-1 runs in which every one of `streams` streams has one 100-byte
// record (one segment in a pack sorted by stream, as a one-minute step of
// 100-byte single-record batches leaves it), over memory buckets: the
// merge's CPU, not S3's latency. It reports stream entries merged per
// second, input pack MB per second and the live heap after it (the
// merged run and the settler's caches).
//
//	go test ./shared/settle -run '^$' -bench Merge -benchtime 1x
func BenchmarkMerge(b *testing.B) {
	for _, tc := range []struct{ streams, runs int }{{100_000, 10}, {1_000_000, 3}} {
		b.Run(fmt.Sprintf("streams=%d/runs=%d", tc.streams, tc.runs), func(b *testing.B) {
			ctx := b.Context()
			c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
			meta := metastore.NewMem()
			if err := meta.MintEpoch(ctx, c, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
				b.Fatal(err)
			}
			settled := objstore.NewMem("settled")
			body := make([]byte, 100)
			var packBytes int64
			for r := range tc.runs {
				run := format.PassIndex{Epoch: 1, FirstSlot: uint64(2 * r), EndSlot: uint64(2*r + 2), Streams: make([]format.PassStream, tc.streams)}
				var pack []byte
				for i := range run.Streams {
					var id format.StreamID
					binary.BigEndian.PutUint64(id[:], uint64(i))
					rec := format.AppendRecord(nil, format.Record{TimestampMs: int64(r), Body: body})
					off := len(pack)
					var err error
					if pack, err = format.AppendSegment(pack, format.SegmentInfo{Stream: id, FirstSeq: uint64(r), Count: 1}, rec); err != nil {
						b.Fatal(err)
					}
					seg := pack[off:]
					run.Streams[i] = format.PassStream{Stream: id, FirstSeq: uint64(r), LastSeq: uint64(r), FirstTsMs: int64(r), LastTsMs: int64(r), Bytes: int64(len(rec)),
						Segments: []format.PassSegment{{Slot: run.FirstSlot, FirstSeq: uint64(r), Count: 1, Offset: uint32(off), Length: uint32(len(seg)), CRC: crcOf(seg)}}}
				}
				packBytes += int64(len(pack))
				if err := settled.PutIfAbsent(ctx, format.PackKey(c.Star, c.Class.String(), 1, run.FirstSlot, run.EndSlot, run.Digest, run.FirstSlot), pack); err != nil {
					b.Fatal(err)
				}
				obj, err := format.AppendPassIndex(nil, run)
				if err != nil {
					b.Fatal(err)
				}
				if err := settled.PutIfAbsent(ctx, format.RunIndexKey(c.Star, c.Class.String(), 1, run.FirstSlot), obj); err != nil {
					b.Fatal(err)
				}
			}
			end := metastore.Cursor{Epoch: 1, Slot: uint64(2 * tc.runs)}
			for _, k := range []metastore.CursorKind{metastore.Checkpoint, metastore.Settled} {
				if err := meta.AdvanceCursor(ctx, c, k, metastore.Cursor{Epoch: 1}, end); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				s := &Settler{Meta: meta, Settled: settled, PassIndex: true, Fanout: tc.runs}
				s.initWindow()
				if _, err := s.window.Runs(ctx, c, metastore.Cursor{Epoch: 1}, end); err != nil { // warm, as a settler's
					b.Fatal(err)
				}
				var res Result
				start := time.Now()
				ok, err := s.merge(ctx, c, &res)
				took := time.Since(start)
				if err != nil || !ok || res.MergedStreams != tc.streams {
					b.Fatalf("merge: %t, %+v, %v", ok, res, err)
				}
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(tc.streams*tc.runs)/took.Seconds(), "entries/s")
				b.ReportMetric(float64(packBytes)/1e6/took.Seconds(), "pack-MB/s")
				b.ReportMetric(took.Seconds(), "s/merge")
				b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
				runtime.KeepAlive(s)
			}
		})
	}
}

// BenchmarkUnflushedOf measures what every settle step on the pass index
// computes over the live runs (unflushedOf: per stream, its packed
// entries after its last marker): `runs` runs of `streams` single-segment
// entries each (a window where every stream is in every run), in
// entries a second, and the heap it holds.
//
//	go test ./shared/settle -run '^$' -bench UnflushedOf -benchtime 1x
func BenchmarkUnflushedOf(b *testing.B) {
	const streams, runs = 100_000, 83
	c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	window := make([]*format.PassIndex, runs)
	for r := range window {
		p := &format.PassIndex{Epoch: 1, FirstSlot: uint64(r), EndSlot: uint64(r + 1), Streams: make([]format.PassStream, streams)}
		segs := make([]format.PassSegment, streams)
		for i := range p.Streams {
			binary.BigEndian.PutUint64(p.Streams[i].Stream[:], uint64(i))
			segs[i] = format.PassSegment{Slot: p.FirstSlot, FirstSeq: uint64(r), Count: 1, Length: 137}
			p.Streams[i].FirstSeq, p.Streams[i].LastSeq, p.Streams[i].Bytes = uint64(r), uint64(r), 101
			p.Streams[i].Segments = segs[i : i+1 : i+1]
		}
		window[r] = p
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		state, _ := unflushedOf(c, window)
		took := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if len(state) != streams {
			b.Fatalf("%d streams", len(state))
		}
		b.ReportMetric(float64(streams*runs)/took.Seconds(), "entries/s")
		b.ReportMetric(took.Seconds(), "s/step")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/streams, "heap-B/stream")
		runtime.KeepAlive(state)
	}
}
