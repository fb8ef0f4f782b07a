package settle_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/settle"
)

var chainX = metastore.ChainID{Star: "star-0", Class: metastore.Express}

type env struct {
	t       *testing.T
	mem     *metastore.Mem
	set     chain.Set
	settled *objstore.Mem
	star    *absorbtest.Star
	ids     []format.StreamID
	a       *absorb.Absorber
	s       *settle.Settler
	ts      int64
}

func newEnv(t *testing.T, streams int, wrap func(metastore.Store) metastore.Store) *env {
	t.Helper()
	e := &env{t: t, mem: metastore.NewMem(), ids: absorbtest.StreamIDs(streams), ts: 1_700_000_000_000, settled: objstore.NewMem("settled")}
	var meta metastore.Store = e.mem
	if wrap != nil {
		meta = wrap(meta)
	}
	e.set = chain.Set{Star: chainX.Star, W: 2, Buckets: []objstore.Bucket{objstore.NewMem("x-az1"), objstore.NewMem("x-az2"), objstore.NewMem("x-az3")}}
	star, err := absorbtest.NewStar(t.Context(), e.mem, chainX, e.set)
	if err != nil {
		t.Fatal(err)
	}
	e.star = star
	sets := absorb.Sets{Express: e.set}
	e.a = &absorb.Absorber{Meta: meta, Sets: sets, MaxSlotsPerPass: 4}
	e.s = &settle.Settler{Meta: meta, Sets: sets, Settled: e.settled}
	return e
}

func (e *env) flights(n int) {
	e.t.Helper()
	counts := make([]int, len(e.ids))
	for i := range counts {
		counts[i] = i%3 + 1
	}
	for range n {
		if _, err := e.star.Flight(e.t.Context(), e.ids, counts, e.ts, 30, 0); err != nil {
			e.t.Fatal(err)
		}
		e.ts += 10
	}
}

func (e *env) absorbAll() {
	e.t.Helper()
	for {
		at, err := e.a.Run(e.t.Context(), chainX, e.star.Released())
		if err != nil {
			e.t.Fatal(err)
		}
		if !at.Less(e.star.Released()) {
			return
		}
	}
}

func (e *env) head() metastore.Head {
	e.t.Helper()
	h, err := e.mem.GetHead(e.t.Context(), chainX)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func (e *env) refs(i int) []metastore.Ref {
	e.t.Helper()
	refs, err := e.mem.QueryRefs(e.t.Context(), e.ids[i].String(), 0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return refs
}

// check reads every stream back through its refs, transit and settled.
func (e *env) check() {
	e.t.Helper()
	for _, id := range e.ids {
		got, err := absorbtest.ReadStream(e.t.Context(), e.mem, e.set, e.settled, id)
		if err != nil {
			e.t.Fatalf("read stream %s: %v", id, err)
		}
		if err := absorbtest.Equal(got, e.star.Written(id)); err != nil {
			e.t.Fatalf("stream %s: %v", id, err)
		}
	}
}

// checkSettled checks that every ref is settled, that its objects parse
// and hold exactly the ref's range between them, in order, and that each
// holds at most MaxObjectBytes of records (unless it is one record).
func (e *env) checkSettled() {
	e.t.Helper()
	maxObj := e.s.MaxObjectBytes
	if maxObj == 0 {
		maxObj = settle.DefaultMaxObjectBytes
	}
	for i := range e.ids {
		for _, r := range e.refs(i) {
			next := r.FirstSeq
			for li, l := range r.Locations {
				if !l.Settled {
					e.t.Fatalf("stream %d: ref %d-%d not settled: %+v", i, r.FirstSeq, r.LastSeq, r.Locations)
				}
				obj, err := e.settled.Get(e.t.Context(), l.Key, 0, -1)
				if err != nil {
					e.t.Fatal(err)
				}
				h, recs, err := format.ParseSettled(obj)
				last := li == len(r.Locations)-1
				if err != nil || h.FirstSeq != next || l.FirstSeq != next || len(recs) != int(h.LastSeq-h.FirstSeq+1) ||
					(li == 0 && h.FirstTsMs != r.FirstTsMs) || (last && (h.LastSeq != r.LastSeq || h.LastTsMs != r.LastTsMs)) ||
					int64(len(obj))-format.SettledHeaderSize != l.Length || l.Offset != format.SettledHeaderSize {
					e.t.Fatalf("stream %d: object %s: %+v, %v (ref %+v)", i, l.Key, h, err, r)
				}
				if rb := int64(len(obj) - format.SettledHeaderSize - format.SegmentSize(0)); rb > maxObj && len(recs) > 1 && len(r.Locations) < settle.MaxObjectsPerRef {
					e.t.Fatalf("stream %d: object %s holds %d record bytes, over MaxObjectBytes %d", i, l.Key, rb, maxObj)
				}
				next = h.LastSeq + 1
			}
			if len(r.Locations) > settle.MaxObjectsPerRef {
				e.t.Fatalf("stream %d: ref %d-%d points at %d objects, over %d", i, r.FirstSeq, r.LastSeq, len(r.Locations), settle.MaxObjectsPerRef)
			}
		}
	}
}

func cur(e, s uint64) metastore.Cursor { return metastore.Cursor{Epoch: e, Slot: s} }

func TestSettleSwapsRefsToSettledObjects(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.flights(10)
	e.absorbAll() // passes of 4 slots: three refs per stream
	if n := len(e.refs(0)); n != 3 {
		t.Fatalf("%d refs before settle", n)
	}
	res, err := e.s.Step(t.Context(), chainX)
	if err != nil {
		t.Fatal(err)
	}
	if res.From != cur(1, 0) || res.To != cur(1, 10) || res.Slots != 10 || res.Streams != 3 || res.Objects != 3 {
		t.Fatalf("step: %+v", res)
	}
	if h := e.head(); h.Settled != cur(1, 10) {
		t.Fatalf("head %+v", h)
	}
	for i := range e.ids {
		if refs := e.refs(i); len(refs) != 1 {
			t.Fatalf("stream %d: %d refs after settle, want one", i, len(refs))
		}
	}
	e.checkSettled()
	e.check()
	// Nothing left: a rerun is a noop.
	if res, err := e.s.Step(t.Context(), chainX); err != nil || res.From != res.To {
		t.Fatalf("second step: %+v, %v", res, err)
	}
}

func TestSettleMergesSmallObjects(t *testing.T) {
	for _, tc := range []struct {
		below int64
		refs  int
	}{{0, 1}, {-1, 2}} {
		e := newEnv(t, 2, nil)
		e.s.MergeBelowBytes = tc.below
		e.flights(5)
		e.absorbAll()
		if _, err := e.s.Run(t.Context(), chainX); err != nil {
			t.Fatal(err)
		}
		first := e.refs(0)[0].Locations[0].Key
		e.flights(5)
		e.absorbAll()
		res, err := e.s.Step(t.Context(), chainX)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(e.refs(0)); got != tc.refs {
			t.Fatalf("merge below %d: %d refs, want %d", tc.below, got, tc.refs)
		}
		_, herr := e.settled.Head(t.Context(), first)
		if tc.refs == 1 {
			if res.Merged != 2 || !errors.Is(herr, objstore.ErrNotFound) {
				t.Fatalf("merge: %+v; superseded object: %v", res, herr)
			}
		} else if res.Merged != 0 || herr != nil {
			t.Fatalf("no merge: %+v; first object: %v", res, herr)
		}
		e.checkSettled()
		e.check()
	}
}

// failOnce fails the first call of a method, after (landed) or instead of
// the call.
type failOnce struct {
	metastore.Store
	advance, swap atomic.Bool
}

func (f *failOnce) AdvanceCursor(ctx context.Context, c metastore.ChainID, k metastore.CursorKind, from, to metastore.Cursor) error {
	if k == metastore.Checkpoint && f.advance.CompareAndSwap(true, false) {
		return fmt.Errorf("crash before the checkpoint CAS: %w", absorbtest.ErrFault)
	}
	return f.Store.AdvanceCursor(ctx, c, k, from, to)
}

func (f *failOnce) SwapRefs(ctx context.Context, old []metastore.Ref, repl metastore.Ref) error {
	if f.swap.CompareAndSwap(true, false) {
		return fmt.Errorf("crash after the object write, before the swap: %w", absorbtest.ErrFault)
	}
	return f.Store.SwapRefs(ctx, old, repl)
}

// TestSettleStopsAtCheckpoint: refs of a pass whose checkpoint CAS has not
// happened (a crash) stay in transit: that pass may still rewrite them.
func TestSettleStopsAtCheckpoint(t *testing.T) {
	var fo *failOnce
	e := newEnv(t, 2, func(s metastore.Store) metastore.Store { fo = &failOnce{Store: s}; return fo })
	e.flights(8)
	if _, err := e.a.Pass(t.Context(), chainX, e.star.Released()); err != nil { // [0,4)
		t.Fatal(err)
	}
	fo.advance.Store(true)
	if _, err := e.a.Pass(t.Context(), chainX, e.star.Released()); !errors.Is(err, absorbtest.ErrFault) { // [4,8) crashes
		t.Fatalf("crashing pass: %v", err)
	}
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	h := e.head()
	if h.Settled != cur(1, 4) || h.Checkpoint != cur(1, 4) || h.Absorbing != cur(1, 8) {
		t.Fatalf("head %+v", h)
	}
	refs := e.refs(0)
	if len(refs) != 2 || !refs[0].Locations[0].Settled || refs[1].Locations[0].Settled {
		t.Fatalf("refs %+v", refs)
	}
	e.check()
	e.absorbAll() // completes the crashed pass
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	e.checkSettled()
	e.check()
}

func TestSettleCrashBetweenObjectAndSwap(t *testing.T) {
	var fo *failOnce
	e := newEnv(t, 2, func(s metastore.Store) metastore.Store { fo = &failOnce{Store: s}; return fo })
	e.flights(6)
	e.absorbAll()
	fo.swap.Store(true)
	if _, err := e.s.Step(t.Context(), chainX); !errors.Is(err, absorbtest.ErrFault) {
		t.Fatalf("crashing step: %v", err)
	}
	if h := e.head(); h.Settled != cur(1, 0) {
		t.Fatalf("settled moved after a crash: %+v", h)
	}
	e.check()
	// The rerun finds its object already written (identical) and swaps.
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if h := e.head(); h.Settled != cur(1, 6) {
		t.Fatalf("head %+v", h)
	}
	e.checkSettled()
	e.check()
}

func TestSettleConcurrentCopies(t *testing.T) {
	e := newEnv(t, 4, nil)
	e.s.MaxSlotsPerStep = 3
	for round := range 3 {
		e.flights(7)
		e.absorbAll()
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = e.s.Run(context.Background(), chainX)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d copy %d: %v", round, i, err)
			}
		}
		if h := e.head(); h.Settled != h.Checkpoint {
			t.Fatalf("round %d: head %+v", round, h)
		}
		e.checkSettled()
		e.check()
	}
}

func TestSettleRefusesForeignObject(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.flights(2)
	e.absorbAll()
	r := e.refs(0)[0]
	key := format.SettledKey(e.ids[0], r.FirstSeq, r.LastSeq)
	if err := e.settled.PutIfAbsent(t.Context(), key, []byte("not ours")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Step(t.Context(), chainX); !errors.Is(err, settle.ErrForeign) {
		t.Fatalf("step over a foreign object: %v", err)
	}
	if h := e.head(); h.Settled != cur(1, 0) {
		t.Fatalf("settled moved: %+v", h)
	}
	e.check()
}

func TestSettleAcrossEpochs(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.flights(5)
	if err := e.star.Halt(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	e.flights(3)
	e.absorbAll()
	at, err := e.s.Run(t.Context(), chainX)
	if err != nil {
		t.Fatal(err)
	}
	if at != cur(2, 3) {
		t.Fatalf("settled %s, want 2/3", at)
	}
	e.checkSettled()
	e.check()
}

func TestHandlerFixtures(t *testing.T) {
	e := newEnv(t, 2, nil)
	h := &settle.Handler{Settler: e.s, Chains: []metastore.ChainID{chainX, {Star: "star-never", Class: metastore.Express}}}
	for _, f := range []string{"chain.json", "scheduled.json"} {
		e.flights(3)
		e.absorbAll()
		raw, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Handle(t.Context(), raw); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got := e.head().Settled; got != e.star.Released() {
			t.Fatalf("%s: settled %s, want %s", f, got, e.star.Released())
		}
	}
	e.checkSettled()
	e.check()
	if _, err := h.Handle(t.Context(), []byte(`{"x":1}`)); err == nil {
		t.Fatal("unrecognised event accepted")
	}
}

// TestSettleSplitsInsideARef is issue 19's finding 2: one ref (one absorb
// pass over many flights of one stream) larger than MaxObjectBytes becomes
// several settled objects, split at record boundaries, each within the
// bound; the ref points at all of them and reads back whole.
func TestSettleSplitsInsideARef(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.a.MaxSlotsPerPass = 64
	e.s.MaxObjectBytes = 4000
	for range 12 {
		if _, err := e.star.Flight(t.Context(), e.ids, []int{20}, e.ts, 100, 0); err != nil {
			t.Fatal(err)
		}
		e.ts += 20
	}
	e.absorbAll()
	refs := e.refs(0)
	if len(refs) != 1 || refs[0].Bytes <= 4*e.s.MaxObjectBytes {
		t.Fatalf("want one ref of many objects' worth, got %d refs (%d bytes)", len(refs), refs[0].Bytes)
	}
	res, err := e.s.Step(t.Context(), chainX)
	if err != nil {
		t.Fatal(err)
	}
	refs = e.refs(0)
	if len(refs) != 1 || len(refs[0].Locations) < 5 || res.Objects != len(refs[0].Locations) {
		t.Fatalf("step %+v: %d refs, %d locations: want one ref over several objects", res, len(refs), len(refs[0].Locations))
	}
	e.checkSettled()
	e.check()
	// A rerun (another copy) rewrites the same objects byte for byte.
	if _, err := e.s.Step(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	e.checkSettled()
	e.check()
}

// A ref with more than MaxObjectsPerRef objects' worth of records points at
// MaxObjectsPerRef objects at most (each larger instead), so the swapped ref
// stays a small item.
func TestSettleBoundsObjectsPerRef(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.a.MaxSlotsPerPass = 64
	e.s.MaxObjectBytes = 100 // every record (about 150 bytes) would be an object
	for range 20 {
		if _, err := e.star.Flight(t.Context(), e.ids, []int{20}, e.ts, 100, 0); err != nil {
			t.Fatal(err)
		}
		e.ts += 20
	}
	e.absorbAll()
	if refs := e.refs(0); len(refs) != 1 || refs[0].LastSeq+1 <= settle.MaxObjectsPerRef {
		t.Fatalf("want one ref of more than %d records, got %d refs", settle.MaxObjectsPerRef, len(refs))
	}
	if _, err := e.s.Step(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	refs := e.refs(0)
	if n := len(refs[0].Locations); n > settle.MaxObjectsPerRef || n < settle.MaxObjectsPerRef/2 {
		t.Fatalf("%d objects for 400 records: want at most %d, and about that many", n, settle.MaxObjectsPerRef)
	}
	e.checkSettled()
	e.check()
}

// TestSettleChecksEachSegmentOnce: a step computes each transit
// segment's CRC once, where it reads it from a copy (the check that lets
// it fall through to another copy), not again where it builds the
// settled object (issue 36: settle's CPU per GB). Hedging off, so that no
// second copy is read.
func TestSettleChecksEachSegmentOnce(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.set.Hedge = -1
	e.s.Sets = absorb.Sets{Express: e.set}
	e.flights(10)
	e.absorbAll()
	segs := 0
	for i := range e.ids {
		for _, r := range e.refs(i) {
			segs += len(r.Locations)
		}
	}
	checks, restore := settle.CountSegmentChecks()
	defer restore()
	res, err := e.s.Step(t.Context(), chainX)
	if err != nil {
		t.Fatal(err)
	}
	if res.Objects != 3 || segs != 30 {
		t.Fatalf("step: %+v over %d segments", res, segs)
	}
	if n := checks(); n != int64(segs) {
		t.Fatalf("%d segment checks for %d segments read", n, segs)
	}
	e.checkSettled()
	e.check()
}

// viewing counts a bucket's reads: Get (a copy) and View (objstore.Viewer).
type viewing struct {
	objstore.Bucket
	gets, views atomic.Int64
}

func (v *viewing) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	v.gets.Add(1)
	return v.Bucket.Get(ctx, key, off, n)
}

func (v *viewing) View(ctx context.Context, key string, off, n int64) ([]byte, error) {
	v.views.Add(1)
	return objstore.View(ctx, v.Bucket, key, off, n)
}

// TestSettleViewsWhatItReads: settle only reads the bytes it copies into
// its objects, so it reads segments from the chain's copies and the
// settled bucket with objstore.View (chain.Set.ViewRange): an in-memory bucket
// hands out its bytes instead of a copy (issue 36). Refs mode reads
// transit segments, then (the second step, the small objects merged)
// settled ones; the pass index reads the packed segments' spans.
func TestSettleViewsWhatItReads(t *testing.T) {
	for _, pass := range []bool{false, true} {
		t.Run(fmt.Sprintf("pass-index=%v", pass), func(t *testing.T) {
			e := newEnv(t, 3, nil)
			if pass {
				e.withIndex()
			}
			var chainReads []*viewing
			for i, b := range e.set.Buckets {
				v := &viewing{Bucket: b}
				chainReads = append(chainReads, v)
				e.set.Buckets[i] = v
			}
			settled := &viewing{Bucket: e.settled}
			e.s.Settled = settled
			for range 2 {
				e.flights(4)
				e.absorbAll()
				for _, v := range append(chainReads, settled) { // settle's reads only
					v.gets.Store(0)
				}
				if _, err := e.s.Step(t.Context(), chainX); err != nil {
					t.Fatal(err)
				}
			}
			var views int64
			for i, v := range chainReads {
				views += v.views.Load()
				if g := v.gets.Load(); g != 0 && pass { // refs mode walks the slots' envelopes with Get
					t.Errorf("chain bucket %d: %d GETs copied", i, g)
				}
			}
			if views == 0 {
				t.Error("no chain read viewed")
			}
			if g := settled.gets.Load(); g != 0 && !pass { // the pass index's window reads its runs with Get
				t.Errorf("settled bucket: %d GETs copied (%d viewed)", g, settled.views.Load())
			}
			if !pass && settled.views.Load() == 0 {
				t.Error("refs mode's second step viewed no settled object")
			}
			e.checkMixed()
		})
	}
}
