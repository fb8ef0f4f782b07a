package settle

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/dir"
	"github.com/strandlog/strand/shared/passindex"
)

// countBucket counts a bucket's GETs and PUTs and their bytes.
type countBucket struct {
	objstore.Bucket
	gets, getBytes, puts, putBytes atomic.Int64
}

func (b *countBucket) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	body, err := b.Bucket.Get(ctx, key, off, n)
	b.gets.Add(1)
	b.getBytes.Add(int64(len(body)))
	return body, err
}

// GetInto counts a GET, into the bucket's own GetInto (as S3's: the
// objects are not on the heap before they are read).
func (b *countBucket) GetInto(ctx context.Context, key string, off int64, dst []byte) (int, error) {
	n, err := objstore.GetInto(ctx, b.Bucket, key, off, dst)
	b.gets.Add(1)
	b.getBytes.Add(int64(n))
	return n, err
}

func (b *countBucket) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	b.puts.Add(1)
	b.putBytes.Add(int64(len(body)))
	return b.Bucket.PutIfAbsent(ctx, key, body)
}

// BenchmarkHourlyStep measures the settle step that runs once an hour
// at the defaults (design 014: a one-minute settle, Fanout 60, a 24 h
// FlushAge; issue 17, "The hourly step at 1,000,000 streams"): the live
// window is 23 hour runs and 60 minute runs (83 runs, here all level-1
// runs of 16 slots, every stream in every run with one record of 8 body
// bytes: small payloads keep the fixture small; the run indexes are
// their real size, 104 bytes an entry), in a directory bucket (the
// objects are not on the heap, as S3's are not in a Lambda's), the
// settler's window with the settle Lambda's budget (1,024 MiB: half of
// its 2,048 MiB). Modes:
//
//   - merge: the merge of the 60 minute runs (Settler.merge, Fanout 60);
//   - ageflush: the age flush of the streams whose oldest entry is in the
//     oldest run (1 in 24 of them: the run turning FlushAge old): their
//     unflushed entries by the walk of the 83 runs through the window
//     (unflushedRefs) and their flushes (flushStreams: settled objects,
//     SettleRef), as runStep does;
//   - ageflush-onebyone: ageflush with every piece read by its flush, a
//     GET each (the reads before the coalesced ones: coalesce.go);
//   - both: the age flush then the merge, one settler, as the step that
//     does both in production (runStep, then merge).
//
// It reports the process's CPU time (user and system, all threads:
// getrusage) per step, the heap's peak above what was live before it
// (live and unswept objects, sampled every millisecond), and the
// settled bucket's GETs and PUTs and their bytes. The 1,000,000 streams
// case (about 14 GB of fixture on disk: ageflush, then the merge alone
// on a window of its 60 runs, another 10 GB: merge-only) runs with
// STRAND_BENCH_1M=1; GOMEMLIMIT=1843MiB is the settle Lambda's limit:
//
//	GOMEMLIMIT=1843MiB go test ./shared/settle -run '^$' -bench 'HourlyStep/streams=100000/' -benchtime 1x
//	STRAND_BENCH_1M=1 go test ./shared/settle -run '^$' -bench 'HourlyStep/streams=1000000/' -benchtime 1x -timeout 90m
//	STRAND_BENCH_1M=1 GOMEMLIMIT=1843MiB go test ./shared/settle -run '^$' -bench 'HourlyStep/merge-only' -benchtime 1x -timeout 90m
func BenchmarkHourlyStep(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if os.Getenv("STRAND_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	const hours, minutes, slots, flushAge = 23, 60, 16, 24 // flushAge in hours
	for _, streams := range sizes {
		modes := []string{"merge", "ageflush", "ageflush-onebyone", "both"}
		if streams > 100_000 {
			modes = []string{"ageflush"}
		}
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			benchHourlyStep(b, streams, hours, minutes, slots, flushAge, modes)
		})
		if streams > 100_000 {
			// The merge alone, on a window of its 60 runs only (7 GB of
			// fixture on disk, not 14).
			b.Run(fmt.Sprintf("merge-only/streams=%d", streams), func(b *testing.B) {
				benchHourlyStep(b, streams, 0, minutes, slots, flushAge, []string{"merge"})
			})
		}
	}
}

func benchHourlyStep(b *testing.B, streams, hours, minutes, slots, flushAge int, modes []string) {
	{
		root := b.TempDir()
		fixture, err := dir.Open(root, "settled")
		if err != nil {
			b.Fatal(err)
		}
		runs := hours + minutes
		cs := newChainState(stateKey{flushed: metastore.Cursor{Epoch: 1}, merged: metastore.Cursor{Epoch: 1, Slot: uint64(hours * slots)}, settled: metastore.Cursor{Epoch: 1, Slot: uint64(runs * slots)}})
		c, _, packBytes := mergeFixture(b, fixture, streams, runs, slots, 0, func(int, int) int { return 8 }, nil, cs.fold)
		var want []format.StreamID
		for i := 0; i < streams; i += flushAge {
			var id format.StreamID
			binary.BigEndian.PutUint64(id[:], uint64(i)*0x9E3779B97F4A7C15)
			binary.BigEndian.PutUint64(id[8:], uint64(i))
			want = append(want, id)
		}
		fixtureKeys, err := fixture.List(b.Context(), "")
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range modes {
			b.Run(fmt.Sprintf("runs=%d/mode=%s", runs, mode), func(b *testing.B) {
				ctx := b.Context()
				for b.Loop() {
					meta := hourlyMeta(b, c, hours*slots, runs*slots)
					settled := &countBucket{Bucket: fixture}
					s := &Settler{Meta: meta, Settled: settled, PassIndex: true, Fanout: minutes, FlushAge: time.Duration(flushAge) * time.Hour}
					s.window = &passindex.Window{Meta: meta, Bucket: settled, MaxBytes: 1024 << 20, Parallel: passindex.DefaultColdLoadParallel}
					s.windowOnce.Do(func() {})
					s.noCoalesce = mode == "ageflush-onebyone"
					var res Result
					runtime.GC()
					base := heapObjects()
					stop := peakOf()
					startCPU := cpuTime()
					if mode != "merge" {
						entries, err := s.unflushedRefs(ctx, c, cs, want)
						if err != nil {
							b.Fatal(err)
						}
						partsOf := make([][]metastore.Ref, len(want))
						for i, id := range want {
							if partsOf[i] = entries[id]; len(partsOf[i]) != runs {
								b.Fatalf("stream %s: %d entries, want %d", id, len(partsOf[i]), runs)
							}
						}
						entries = nil
						if err := s.flushStreams(ctx, chain.Set{}, c, cs.key.settled, want, partsOf, &res); err != nil {
							b.Fatal(err)
						}
						if res.Flushes != len(want) {
							b.Fatalf("%d flushes, want %d", res.Flushes, len(want))
						}
					}
					if mode == "merge" || mode == "both" {
						if ok, err := s.merge(ctx, c, &res); err != nil || !ok || res.MergedStreams != streams {
							b.Fatalf("merge: %t, %+v, %v", ok, res, err)
						}
					}
					cpu := cpuTime() - startCPU
					peak := stop()
					b.ReportMetric(cpu.Seconds(), "cpu-s/step")
					b.ReportMetric(float64(peak-min(peak, base))/(1<<20), "peak-MiB")
					b.ReportMetric(float64(settled.gets.Load()), "GETs/step")
					b.ReportMetric(float64(settled.getBytes.Load())/1e6, "GET-MB/step")
					b.ReportMetric(float64(settled.puts.Load()), "PUTs/step")
					b.ReportMetric(float64(settled.putBytes.Load())/1e6, "PUT-MB/step")
					b.ReportMetric(float64(packBytes)/1e6, "level1-pack-MB")
					b.ReportMetric(float64(res.Flushes), "flushes")
					runtime.KeepAlive(s)
					// Back to the fixture: what the step wrote goes.
					after, err := fixture.List(ctx, "")
					if err != nil {
						b.Fatal(err)
					}
					for _, k := range after {
						if !hasKey(fixtureKeys, k) {
							if err := fixture.Delete(ctx, k); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
			})
		}
	}
}

func hasKey(sorted []string, k string) bool {
	lo, hi := 0, len(sorted)
	for lo < hi {
		m := (lo + hi) / 2
		if sorted[m] < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(sorted) && sorted[lo] == k
}

// hourlyMeta is a metastore whose chain's head has Merged at slot merged
// and Checkpoint and Settled at settled (epoch 1).
func hourlyMeta(tb testing.TB, c metastore.ChainID, merged, settled int) metastore.Store {
	tb.Helper()
	ctx := context.Background()
	meta := metastore.NewMem()
	if err := meta.MintEpoch(ctx, c, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
		tb.Fatal(err)
	}
	for _, m := range []struct {
		k metastore.CursorKind
		s int
	}{{metastore.Checkpoint, settled}, {metastore.Settled, settled}, {metastore.Merged, merged}} {
		from := metastore.Cursor{Epoch: 1}
		if m.k == metastore.Merged && m.s == 0 {
			continue
		}
		if m.k == metastore.Merged {
			from = metastore.Cursor{} // zero after the first mint
		}
		if err := meta.AdvanceCursor(ctx, c, m.k, from, metastore.Cursor{Epoch: 1, Slot: uint64(m.s)}); err != nil {
			tb.Fatal(err)
		}
	}
	return meta
}
