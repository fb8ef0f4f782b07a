package absorb_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// withIndex switches e's absorber to the pass index, in a fresh settled
// bucket, and returns the window reader over it.
func (e *env) withIndex() (*passindex.Window, objstore.Bucket) {
	settled := objstore.NewMem("settled")
	e.a.Index = settled
	return &passindex.Window{Meta: e.mem, Bucket: settled}, settled
}

// checkIndex reads every stream back through the pass indexes of [0/0,
// checkpoint), by seq from 0 and from the middle, and by timestamp, and
// compares with what the star wrote.
func (e *env) checkIndex(w *passindex.Window, ids []format.StreamID) {
	e.t.Helper()
	ctx := e.t.Context()
	ck := e.head().Checkpoint
	for _, id := range ids {
		want := e.star.Written(id)
		refs, err := w.Refs(ctx, chainX, metastore.Cursor{}, ck, id, 0)
		if err != nil {
			e.t.Fatalf("stream %s: %v", id, err)
		}
		var got []format.Record
		next := uint64(0)
		for _, r := range refs {
			if r.FirstSeq != next {
				e.t.Fatalf("stream %s: part at seq %d, want %d", id, r.FirstSeq, next)
			}
			recs, err := absorbtest.ReadRef(ctx, e.set, nil, r)
			if err != nil {
				e.t.Fatal(err)
			}
			got, next = append(got, recs...), r.LastSeq+1
		}
		if err := absorbtest.Equal(got, want); err != nil {
			e.t.Fatalf("stream %s by seq: %v", id, err)
		}
		if len(want) < 2 {
			continue
		}
		// From the middle by seq, and by the middle record's timestamp:
		// the first part returned holds it, and no earlier part is.
		mid := uint64(len(want) / 2)
		for name, get := range map[string]func() ([]metastore.Ref, error){
			"seq": func() ([]metastore.Ref, error) { return w.Refs(ctx, chainX, metastore.Cursor{}, ck, id, mid) },
			"ts": func() ([]metastore.Ref, error) {
				return w.RefsAt(ctx, chainX, metastore.Cursor{}, ck, id, want[mid].TimestampMs)
			},
		} {
			refs, err := get()
			if err != nil || len(refs) == 0 || refs[0].FirstSeq > mid || refs[0].LastSeq < mid || refs[len(refs)-1].LastSeq != uint64(len(want)-1) {
				e.t.Fatalf("stream %s from the middle by %s: %+v, %v", id, name, refs, err)
			}
			if name == "ts" && refs[0].FirstSeq > 0 && want[refs[0].FirstSeq-1].TimestampMs >= want[mid].TimestampMs {
				e.t.Fatalf("stream %s by ts: started at seq %d past an earlier record at the timestamp", id, refs[0].FirstSeq)
			}
		}
	}
}

// TestPassIndexAbsorb: under the switch a pass writes one index object and
// no ref, its metastore calls are GetHead, BeginAbsorb and AdvanceCursor,
// and every record is found through the indexes by seq and by timestamp,
// across several passes and an epoch boundary.
func TestPassIndexAbsorb(t *testing.T) {
	e := newEnv(t, 7, nil)
	w, settled := e.withIndex()
	e.a.MaxSlotsPerPass = 4
	e.flights(10)
	if err := e.star.Halt(t.Context(), 1); err != nil { // cut 10, next epoch 3
		t.Fatal(err)
	}
	e.flights(5)
	before := e.count.Snapshot()
	at, err := e.a.Run(t.Context(), chainX, e.star.Released())
	if err != nil || at != cur(3, 5) {
		t.Fatalf("run: %s, %v", at, err)
	}
	d := e.count.Snapshot().Sub(before)
	// Passes 1/[0,4) [4,8) [8,10), epoch steps 1->2 (never minted) and
	// 2->3, 3/[0,4) [4,5): five passes of BeginAbsorb and AdvanceCursor,
	// two epoch steps of one AdvanceCursor each, and the switch (the
	// first pass sets Head.Indexed: one AdvanceCursor).
	if d.Of(metacount.PutRefs) != 0 || d.RefItems != 0 || d.Of(metacount.BeginAbsorb) != 5 || d.Of(metacount.AdvanceCursor) != 8 {
		t.Fatalf("run cost %s", d)
	}
	for _, id := range e.ids {
		if refs, err := e.mem.QueryRefs(t.Context(), id.String(), 0, 10); err != nil || len(refs) != 0 {
			t.Fatalf("stream %s has refs %v, %v", id, refs, err)
		}
	}
	keys, err := settled.List(t.Context(), "index/")
	if err != nil || len(keys) != 5 || keys[0] != format.PassIndexKey("star-0", "express", 1, 0) {
		t.Fatalf("index objects %v, %v", keys, err)
	}
	e.checkIndex(w, e.ids)
	// A budget smaller than one pass: every pass read again, by range
	// (no room for a whole one), the same answers.
	tiny := &passindex.Window{Meta: e.mem, Bucket: settled, MaxBytes: 1}
	e.checkIndex(tiny, e.ids)
	if st := tiny.Stats(); st.Objects != 0 || st.Gets != 0 || st.Ranged == 0 {
		t.Fatalf("tiny window cache: %+v", st)
	}
	// The window is walked by key from a pass boundary; the cache answers
	// the second lookup without a GET.
	passes, err := w.Passes(t.Context(), chainX, cur(1, 4), cur(3, 5))
	if err != nil || len(passes) != 4 || passes[0].FirstSlot != 4 || passes[3].Epoch != 3 || passes[3].EndSlot != 5 {
		t.Fatalf("window from 1/4: %d passes, %v", len(passes), err)
	}
	w.Prune(chainX, cur(3, 0))
	if passes, err := w.Passes(t.Context(), chainX, cur(3, 0), cur(3, 5)); err != nil || len(passes) != 2 {
		t.Fatalf("window after prune: %d, %v", len(passes), err)
	}
	// A window that starts inside a pass is broken, loudly.
	if _, err := w.Passes(t.Context(), chainX, cur(1, 1), cur(3, 5)); err == nil {
		t.Fatal("window from inside a pass: no error")
	}
}

// TestPassIndexConcurrentCopies: copies of the absorb racing with
// different release events write identical index objects (a copy that
// finds one already there compares bytes) and the window is exact.
func TestPassIndexConcurrentCopies(t *testing.T) {
	e := newEnv(t, 4, nil)
	w, _ := e.withIndex()
	e.a.MaxSlotsPerPass = 7
	e.flights(40)
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			head := cur(1, uint64(20+i))
			for {
				at, err := e.a.Run(t.Context(), chainX, head)
				if err != nil {
					errs[i] = err
					return
				}
				if !at.Less(head) {
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	if _, err := e.a.Run(t.Context(), chainX, e.star.Released()); err != nil {
		t.Fatal(err)
	}
	e.checkIndex(w, e.ids)
}

// TestItemWritesPerPass counts metastore item writes per absorb pass
// (DynamoDB item writes: each ref put, each transaction's condition check
// on the head, each conditional head update) at 10,000 and 100,000
// streams of 100-byte single-record batches, with refs and with the pass
// index, in two passes: the one at 2 MB/s (20,000 batches a second, the
// star publishing a release event every 250 ms: 4 passes a second of
// 5,000 batches, each of a stream drawn at random, seeded), and the worst
// one (every stream in the pass). Expected counts come from the batches
// the test drew, not from the absorb. docs/performance/many-streams.md ("Many
// streams") quotes its log:
//
//	go test ./shared/absorb -run TestItemWritesPerPass -v
func TestItemWritesPerPass(t *testing.T) {
	const perFlight = 1000 // batches per flight (about 150 KB)
	for _, n := range []int{10_000, 100_000} {
		for _, load := range []string{"2 MB/s", "worst"} {
			// The batches of the pass, per flight: stream index -> records.
			var flights []map[int]int
			touched := map[int]bool{}
			switch load {
			case "2 MB/s":
				rng := rand.New(rand.NewPCG(17, uint64(n)))
				for range 5 {
					f := map[int]int{}
					for range perFlight {
						i := rng.IntN(n)
						f[i]++
						touched[i] = true
					}
					flights = append(flights, f)
				}
			case "worst":
				for first := 0; first < n; first += perFlight {
					f := map[int]int{}
					for i := first; i < min(first+perFlight, n); i++ {
						f[i], touched[i] = 1, true
					}
					flights = append(flights, f)
				}
			}
			for _, indexed := range []bool{false, true} {
				e := newEnv(t, n, nil)
				var w *passindex.Window
				if indexed {
					w, _ = e.withIndex()
					// The switch (Head.Indexed) is set once, by a first
					// pass: not a per-pass cost.
					if _, err := e.a.Pass(t.Context(), chainX, e.star.Released()); err != nil {
						t.Fatal(err)
					}
				}
				for _, f := range flights {
					counts := make([]int, n)
					for i, c := range f {
						counts[i] = c
					}
					if _, err := e.star.Flight(t.Context(), e.ids, counts, e.ts, 100, 0); err != nil {
						t.Fatal(err)
					}
				}
				e.a.MaxSlotsPerPass = len(flights)
				before := e.count.Snapshot()
				res, err := e.a.Pass(t.Context(), chainX, e.star.Released())
				if err != nil || res.Slots != len(flights) {
					t.Fatalf("%d streams: %+v, %v", n, res, err)
				}
				d := e.count.Snapshot().Sub(before)
				items := itemWrites(d)
				mode := "refs"
				k := len(touched)
				want := int64(k) + int64((k+metastore.MaxPutRefsPerTx-1)/metastore.MaxPutRefsPerTx) + 2
				if indexed {
					mode, want = "pass index", 2
				}
				if items != want {
					t.Fatalf("%d streams, %s, %s: %d item writes per pass, want %d (%s)", n, load, mode, items, want, d)
				}
				perSec := ""
				if load == "2 MB/s" {
					perSec = fmt.Sprintf("; %d item writes/s at 4 passes/s", 4*items)
				}
				t.Logf("%7d streams, %-6s (%6d streams in the pass), %-10s: %6d item writes per pass (%s)%s",
					n, load, k, mode, items, d, perSec)
				// Spot-check that the records are found (every 97th stream
				// of the pass).
				if indexed {
					var sample []format.StreamID
					for i := 0; i < n; i += 97 {
						if touched[i] {
							sample = append(sample, e.ids[i])
						}
					}
					e.checkIndex(w, sample)
				}
			}
		}
	}
}

// itemWrites is the DynamoDB item writes of the counted calls: every ref
// PutRefs wrote plus the condition check on the head in each of its
// transactions, and one item for each other write (the absorb's other
// writes are single-item: BeginAbsorb and AdvanceCursor update the head).
func itemWrites(d metacount.Counts) int64 {
	n := d.RefItems
	for op := metacount.Op(0); op.String() != fmt.Sprintf("op(%d)", int(op)); op++ {
		if op.Write() {
			n += d.Of(op)
		}
	}
	return n
}
