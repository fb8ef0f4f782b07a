package passindex_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// chainX is the chain the window tests read.
var chainX = metastore.ChainID{Star: "star-0", Class: metastore.Express}

// windowOfRuns writes `runs` merged runs of `streams` entries each (60
// slots a run, entry i of run r: stream i, seqs r*100..r*100+59 in one
// segment; every third stream with a producer mark and every fifth with a
// command state) and returns the store, bucket and the head whose window
// they are.
func windowOfRuns(t testing.TB, runs, streams int) (metastore.Store, objstore.Bucket, metastore.Head, []format.PassIndex) {
	t.Helper()
	return windowOfRunsIDs(t, runs, streams, clusteredID)
}

// TestWindowCacheBudget: whatever the budget (one smaller than one run:
// nothing cached, every object fetched on every walk; two and a half
// runs; unbounded), the cache never holds more than its budget after a
// call, counted in DecodedBytes, and every stream's parts are the ones an
// unbounded window finds. A walk over a window larger than the budget
// keeps the budget's worth cached (a fetch that needed an eviction enters
// at the cold end), so later walks fetch only the rest, not everything as
// plain LRU under a cyclic scan would. Without the bound, the byte check
// fails at the first walk.
func TestWindowCacheBudget(t *testing.T) {
	const runs, streams = 8, 300
	meta, bucket, h, all := windowOfRuns(t, runs, streams)
	per := passindex.DecodedBytes(&all[0])
	ref := &passindex.Window{Meta: meta, Bucket: bucket, MaxBytes: -1}
	for _, tc := range []struct {
		name     string
		max      int64
		parallel int
		// getsPerWalk bounds the GETs of each walk after the first.
		getsPerWalk int64
	}{
		{"tiny", 1, 0, runs},
		{"tiny-parallel", 1, 4, runs},
		{"4.5-runs", per*9/2 + 1, 0, runs - 3},
		{"4.5-runs-parallel", per*9/2 + 1, 4, runs - 3},
		{"unbounded", -1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &passindex.Window{Meta: meta, Bucket: bucket, MaxBytes: tc.max, Parallel: tc.parallel}
			for i := range streams {
				var id format.StreamID
				binary.BigEndian.PutUint64(id[:], uint64(i))
				before, bst := w.Stats().Gets, w.Stats()
				got, err := w.HeadRefs(t.Context(), chainX, h, id, 0)
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.HeadRefs(t.Context(), chainX, h, id, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != runs || !reflect.DeepEqual(got, want) {
					t.Fatalf("stream %d: %d parts, differ from the unbounded window's %d", i, len(got), len(want))
				}
				st := w.Stats()
				if tc.max > 0 && st.Bytes > tc.max {
					t.Fatalf("after walk %d: %d bytes cached (%d objects), budget %d", i, st.Bytes, st.Objects, tc.max)
				}
				if gets := st.Gets - before; i > 0 && gets > tc.getsPerWalk {
					t.Fatalf("walk %d fetched %d objects, want at most %d", i, gets, tc.getsPerWalk)
				}
				// Past the budget, a lookup reads each object by range,
				// never whole (design 014, "Lookups past the window
				// budget"); the cold load reads each header first and
				// fetches whole only what fits, so even the first walk
				// wastes no whole GET (before, its first Parallel GETs
				// went out before any size was known).
				if gets, ranged := st.Gets-before, st.Ranged-bst.Ranged; tc.max == 1 && (gets != 0 || ranged != runs) {
					t.Fatalf("walk %d with a tiny budget fetched %d objects whole, %d by range, want 0 and all %d", i, gets, ranged, runs)
				}
				if i == 0 && st.Gets > runs {
					t.Fatalf("first walk fetched %d objects, want at most %d", st.Gets, runs)
				}
			}
			if st := w.Stats(); tc.max == 1 && st.Objects != 0 {
				t.Fatalf("tiny budget caches %d objects", st.Objects)
			}
		})
	}
}

// TestWindowCacheBudgetAdds: runs and merged runs settle adds (AddRun,
// AddMerged) count against the budget as fetched ones do.
func TestWindowCacheBudgetAdds(t *testing.T) {
	_, _, _, all := windowOfRuns(t, 6, 100)
	per := passindex.DecodedBytes(&all[0])
	w := &passindex.Window{MaxBytes: 2 * per}
	for i := range all {
		if i%2 == 0 {
			w.AddRun(chainX, &all[i])
		} else {
			w.AddMerged(chainX, &all[i])
		}
		if st := w.Stats(); st.Bytes > 2*per || st.Objects > 2 {
			t.Fatalf("after add %d: %+v, budget %d", i, st, 2*per)
		}
	}
	if st := w.Stats(); st.Objects != 2 || st.Evicted != 4 {
		t.Fatalf("%+v: want 2 objects cached, 4 evicted", st)
	}
}

// TestDecodedBytesEstimate: DecodedBytes of parsed runs is within a
// factor of 1.5 of the live heap they hold (measured as
// BenchmarkWindowMemory measures it: the heap after a GC, with and
// without them).
func TestDecodedBytesEstimate(t *testing.T) {
	for _, streams := range []int{1_000, 50_000} {
		t.Run(fmt.Sprint(streams), func(t *testing.T) {
			_, bucket, _, all := windowOfRuns(t, 6, streams)
			var objs [][]byte
			for _, r := range all {
				obj, err := bucket.Get(t.Context(), format.MergedRunKey(chainX.Star, chainX.Class.String(), 1, r.FirstSlot), 0, -1)
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, obj)
			}
			all = nil
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			held := make([]*format.PassIndex, len(objs))
			var est int64
			for i, obj := range objs {
				p, err := format.ParsePassIndex(obj)
				if err != nil {
					t.Fatal(err)
				}
				held[i] = &p
				est += passindex.DecodedBytes(&p)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			runtime.KeepAlive(held)
			runtime.KeepAlive(objs)
			ratio := float64(heap) / float64(est)
			t.Logf("%d streams: heap %d B, estimate %d B, ratio %.3f", streams, heap, est, ratio)
			if ratio < 1/1.5 || ratio > 1.5 {
				t.Fatalf("heap %d B, estimate %d B: ratio %.3f outside [0.67, 1.5]", heap, est, ratio)
			}
		})
	}
}

// staleHead answers the first GetHead with stale, then the store's.
type staleHead struct {
	metastore.Store
	stale metastore.Head
	calls int
}

func (s *staleHead) GetHead(ctx context.Context, c metastore.ChainID) (metastore.Head, error) {
	s.calls++
	if s.calls == 1 {
		return s.stale, nil
	}
	return s.Store.GetHead(ctx, c)
}

// TestChainsLookupRereadsHead: the probe's lookup that finds a run gone
// under a stale head (trim deleted it after the cursor moved; a bounded
// cache refetches instead of serving it from memory) re-reads the head
// and answers from the current window, as StreamRefs does. Regression
// test: it returned the not-found error.
func TestChainsLookupRereadsHead(t *testing.T) {
	meta, bucket, h, _ := windowOfRuns(t, 3, 10)
	first := metastore.Cursor{Epoch: 1, Slot: 60}
	h0, err := meta.GetHead(t.Context(), chainX)
	if err != nil {
		t.Fatal(err)
	}
	// Indexed from the start (set at the checkpoint itself), then the
	// window's cursors.
	if err := meta.AdvanceCursor(t.Context(), chainX, metastore.Indexed, h0.Indexed, h0.Checkpoint); err != nil {
		t.Fatal(err)
	}
	if err := meta.AdvanceCursor(t.Context(), chainX, metastore.Checkpoint, h0.Checkpoint, h.Checkpoint); err != nil {
		t.Fatal(err)
	}
	h0, err = meta.GetHead(t.Context(), chainX)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		k        metastore.CursorKind
		from, to metastore.Cursor
	}{{metastore.Settled, h0.Settled, h.Settled}, {metastore.Merged, h0.Merged, h.Settled}, {metastore.Flushed, h0.Flushed, first}} {
		if err := meta.AdvanceCursor(t.Context(), chainX, a.k, a.from, a.to); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := meta.GetHead(t.Context(), chainX)
	if err != nil {
		t.Fatal(err)
	}
	stale := cur
	stale.Flushed = metastore.Cursor{Epoch: 1}
	// Trim deleted the run flushed past.
	if err := bucket.Delete(t.Context(), format.MergedRunKey(chainX.Star, chainX.Class.String(), 1, 0)); err != nil {
		t.Fatal(err)
	}
	w := &passindex.Window{Meta: &staleHead{Store: meta, stale: stale}, Bucket: bucket, MaxBytes: 1}
	var id format.StreamID
	binary.BigEndian.PutUint64(id[:], 3)
	parts, err := w.ChainsLookup([]metastore.ChainID{chainX})(t.Context(), id.String(), 0, 100)
	if err != nil || len(parts) != 2 || parts[0].FirstSeq != 100 {
		t.Fatalf("lookup: %d parts, %v; want the 2 of the current window from seq 100", len(parts), err)
	}
}
