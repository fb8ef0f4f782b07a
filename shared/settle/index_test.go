package settle_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
)

// withIndex switches e's absorb and settle to the pass index (design 014).
// Under TestSettleTinyWindowCache, settle and the checks read the window
// through a cache smaller than one run.
func (e *env) withIndex() {
	e.a.Index = e.settled
	e.s.PassIndex = true
	if windowMaxBytes != 0 {
		e.s.Window = &passindex.Window{Meta: e.mem, Bucket: e.settled, MaxBytes: windowMaxBytes, Parallel: 4}
	}
}

// windowMaxBytes (0: each window's default) is the budget of the windows
// settle and checkMixed read (TestSettleTinyWindowCache sets it).
var windowMaxBytes int64

// TestSettleTinyWindowCache runs the pass index settle tests with a window
// cache budget smaller than one run: settle fetches every run and pass
// again on every use (passindex.Window.MaxBytes), and every step's
// results and every record read back are the same.
func TestSettleTinyWindowCache(t *testing.T) {
	windowMaxBytes = 1
	defer func() { windowMaxBytes = 0 }()
	for name, test := range map[string]func(*testing.T){
		"PassIndex":            TestSettlePassIndex,
		"RunsPackSmallStreams": TestSettleRunsPackSmallStreams,
		"FlushByBytes":         TestSettleFlushByBytes,
		"FlushByAge":           TestSettleFlushByAge,
		"MergeRuns":            TestSettleMergeRuns,
		"MergeAcrossEpochs":    TestSettleMergeAcrossEpochs,
		"CrashAndCopies":       TestSettlePassIndexCrashAndCopies,
	} {
		t.Run(name, test)
	}
}

// checkMixed reads every stream back through its refs and then its parts
// in the window: the runs of [flushed, settled) and the passes of
// [settled, checkpoint): contiguous from 0, and exactly what the star
// wrote.
func (e *env) checkMixed() {
	e.t.Helper()
	ctx := e.t.Context()
	h := e.head()
	if h.Settled.Less(h.Flushed) {
		e.t.Fatalf("head %+v: flushed past settled", h)
	}
	w := &passindex.Window{Meta: e.mem, Bucket: e.settled, MaxBytes: windowMaxBytes}
	for _, id := range e.ids {
		refs, err := e.mem.QueryRefs(ctx, id.String(), 0, 1000)
		if err != nil {
			e.t.Fatal(err)
		}
		next := uint64(0)
		if len(refs) > 0 {
			next = refs[len(refs)-1].LastSeq + 1
		}
		parts, err := w.HeadRefs(ctx, chainX, h, id, next)
		if err != nil {
			e.t.Fatal(err)
		}
		var got []format.Record
		at := uint64(0)
		for _, r := range append(refs, parts...) {
			if r.FirstSeq != at {
				e.t.Fatalf("stream %s: ref or part at %d, want %d", id, r.FirstSeq, at)
			}
			recs, err := absorbtest.ReadRef(ctx, e.set, e.settled, r)
			if err != nil {
				e.t.Fatal(err)
			}
			got, at = append(got, recs...), r.LastSeq+1
		}
		if err := absorbtest.Equal(got, e.star.Written(id)); err != nil {
			e.t.Fatalf("stream %s: %v", id, err)
		}
	}
}

// TestSettlePassIndex: settle takes whole passes from the settled cursor;
// with every stream flushed at every step (FlushBytes 1) it writes one ref
// per stream and step with SettleRef (the absorb wrote none), merges the
// next step into a small object, and every record reads back exactly at
// every stage.
func TestSettlePassIndex(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.withIndex()
	e.s.FlushBytes = 1
	e.s.MaxSlotsPerStep = 5
	e.flights(10)
	e.absorbAll() // passes [0,4) [4,8) [8,10)
	if n := len(e.refs(0)); n != 0 {
		t.Fatalf("%d refs before settle", n)
	}
	e.checkMixed()
	res, err := e.s.Step(t.Context(), chainX)
	if err != nil {
		t.Fatal(err)
	}
	// The step covers slots [0,5): the passes that start in it, to 8.
	if res.From != cur(1, 0) || res.To != cur(1, 8) || res.Slots != 8 || res.Streams != 3 || res.Objects != 3 {
		t.Fatalf("step: %+v", res)
	}
	e.checkMixed()
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if h := e.head(); h.Settled != cur(1, 10) {
		t.Fatalf("head %+v", h)
	}
	for i := range e.ids {
		if refs := e.refs(i); len(refs) != 1 {
			t.Fatalf("stream %d: %d refs, want one (the second step merged into the first's small object)", i, len(refs))
		}
	}
	e.checkSettled()
	e.check()
	// Nothing left: a rerun is a noop.
	if res, err := e.s.Step(t.Context(), chainX); err != nil || res.From != res.To {
		t.Fatalf("second step: %+v, %v", res, err)
	}
}

// TestWindowCacheFollowsSettle: a long-lived reader's window (the node's)
// holds the passes of the window, not every pass it ever read: once settle
// moved past them, its next lookup drops them.
func TestWindowCacheFollowsSettle(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.withIndex()
	e.s.FlushBytes = 1 // no run stays in the window
	w := &passindex.Window{Meta: e.mem, Bucket: e.settled}
	st := metastore.Stream{Name: "s", ID: e.ids[0].String(), Class: chainX.Class, Star: chainX.Star}
	for round := range 5 {
		e.flights(8)
		e.absorbAll() // two passes of 4 slots
		// Page to an empty page: the refs first, then the window's parts.
		var refs []metastore.Ref
		var err error
		for from := uint64(0); err == nil; {
			var page []metastore.Ref
			if page, err = w.QueryRefs(t.Context(), st, from, 1000); len(page) == 0 {
				break
			}
			refs, from = append(refs, page...), page[len(page)-1].LastSeq+1
		}
		if err != nil || len(refs) == 0 || refs[len(refs)-1].LastSeq+1 != uint64(len(e.star.Written(e.ids[0]))) {
			t.Fatalf("round %d: refs %d, %v", round, len(refs), err)
		}
		if n := w.Cached(); n != 2 {
			t.Fatalf("round %d: %d passes cached, want the window's 2", round, n)
		}
		if _, err := e.s.Run(t.Context(), chainX); err != nil {
			t.Fatal(err)
		}
	}
}

// failSettle fails the first SettleRef: a crash after the objects were
// written, before the ref.
type failSettle struct {
	metastore.Store
	armed atomic.Bool
}

func (f *failSettle) SettleRef(ctx context.Context, c metastore.ChainID, at metastore.Cursor, old []metastore.Ref, repl metastore.Ref) error {
	if f.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("crash before the settle ref: %w", absorbtest.ErrFault)
	}
	return f.Store.SettleRef(ctx, c, at, old, repl)
}

func TestSettlePassIndexCrashAndCopies(t *testing.T) {
	var fs *failSettle
	e := newEnv(t, 4, func(s metastore.Store) metastore.Store { fs = &failSettle{Store: s}; return fs })
	e.withIndex()
	e.s.FlushBytes = 1 // every stream flushed at every step
	e.s.MaxSlotsPerStep = 3
	e.flights(6)
	e.absorbAll()
	fs.armed.Store(true)
	if _, err := e.s.Step(t.Context(), chainX); err == nil {
		t.Fatal("crashing step: no error")
	}
	if h := e.head(); h.Settled != cur(1, 0) {
		t.Fatalf("settled moved after a crash: %+v", h)
	}
	e.checkMixed()
	for round := range 3 {
		e.flights(7)
		if round == 1 {
			if err := e.star.Halt(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
			e.flights(2)
		}
		e.absorbAll()
		e.settleRacing(t, round, 8)
		e.checkSettled()
		e.check()
	}
}

// settleRacing runs n copies of settle on chainX at once, each until it
// reaches the checkpoint, and fails t (naming round) on any copy's error.
func (e *env) settleRacing(t *testing.T, round, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				at, err := e.s.Run(context.Background(), chainX)
				if err != nil || at == e.head().Checkpoint {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("round %d copy %d: %v", round, i, err)
		}
	}
}
