package trim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/trim"
)

var chainX = metastore.ChainID{Star: "star-0", Class: metastore.Express}

// faults is a metastore wrapper whose armed faults fire once each.
type faults struct {
	metastore.Store
	// advanceLost: the checkpoint CAS lands, its answer is lost (a timeout).
	advanceLost atomic.Bool
	// putFail: a PutRefs fails before writing.
	putFail atomic.Bool
	// swapLost: a SwapRefs lands, its answer is lost.
	swapLost atomic.Bool
}

func (f *faults) AdvanceCursor(ctx context.Context, c metastore.ChainID, k metastore.CursorKind, from, to metastore.Cursor) error {
	err := f.Store.AdvanceCursor(ctx, c, k, from, to)
	if err == nil && k == metastore.Checkpoint && f.advanceLost.CompareAndSwap(true, false) {
		return fmt.Errorf("timeout after the checkpoint CAS: %w", absorbtest.ErrFault)
	}
	return err
}

func (f *faults) PutRefs(ctx context.Context, c metastore.ChainID, pass metastore.Cursor, refs []metastore.Ref) error {
	if f.putFail.CompareAndSwap(true, false) {
		return fmt.Errorf("put refs failed: %w", absorbtest.ErrFault)
	}
	return f.Store.PutRefs(ctx, c, pass, refs)
}

func (f *faults) SwapRefs(ctx context.Context, old []metastore.Ref, repl metastore.Ref) error {
	err := f.Store.SwapRefs(ctx, old, repl)
	if err == nil && f.swapLost.CompareAndSwap(true, false) {
		return fmt.Errorf("timeout after the swap: %w", absorbtest.ErrFault)
	}
	return err
}

// SettleRef: under swapLost, a settle ref lands and its answer is lost.
func (f *faults) SettleRef(ctx context.Context, c metastore.ChainID, at metastore.Cursor, old []metastore.Ref, repl metastore.Ref) error {
	err := f.Store.SettleRef(ctx, c, at, old, repl)
	if err == nil && f.swapLost.CompareAndSwap(true, false) {
		return fmt.Errorf("timeout after the settle ref: %w", absorbtest.ErrFault)
	}
	return err
}

type env struct {
	t       *testing.T
	mem     *metastore.Mem
	meta    *faults
	set     chain.Set
	settled *objstore.Mem
	star    *absorbtest.Star
	ids     []format.StreamID
	names   []string
	clk     *clock.Manual
	// One counting wrapper per component, all over meta.
	ca, cs, ct *metacount.Store
	a          *absorb.Absorber
	ah         *absorb.Handler
	s          *settle.Settler
	tr         *trim.Trimmer
	ts         int64
}

func newEnv(t *testing.T, streams int, retentionMs int64) *env {
	t.Helper()
	e := &env{t: t, mem: metastore.NewMem(), ids: absorbtest.StreamIDs(streams), ts: 1_700_000_000_000,
		settled: objstore.NewMem("settled"), clk: clock.NewManual(time.UnixMilli(1_700_000_000_000))}
	e.meta = &faults{Store: e.mem}
	e.set = chain.Set{Star: chainX.Star, W: 2, Buckets: []objstore.Bucket{objstore.NewMem("x-az1"), objstore.NewMem("x-az2"), objstore.NewMem("x-az3")}}
	star, err := absorbtest.NewStar(t.Context(), e.mem, chainX, e.set)
	if err != nil {
		t.Fatal(err)
	}
	e.star = star
	for i, id := range e.ids {
		name := fmt.Sprintf("s%02d", i)
		e.names = append(e.names, name)
		_, err := e.mem.CreateStream(t.Context(), metastore.Stream{Name: name, ID: id.String(), Class: metastore.Express,
			Star: chainX.Star, CreatedMs: e.ts, RetentionMs: retentionMs, State: metastore.StreamActive})
		if err != nil {
			t.Fatal(err)
		}
	}
	sets := absorb.Sets{Express: e.set}
	e.ca, e.cs, e.ct = metacount.New(e.meta), metacount.New(e.meta), metacount.New(e.meta)
	e.a = &absorb.Absorber{Meta: e.ca, Sets: sets, MaxSlotsPerPass: 16}
	e.ah = &absorb.Handler{Absorber: e.a, Chains: []metastore.ChainID{chainX}}
	e.s = &settle.Settler{Meta: e.cs, Sets: sets, Settled: e.settled, MaxSlotsPerStep: 16}
	e.tr = &trim.Trimmer{Meta: e.ct, Sets: sets, Settled: e.settled, Clock: e.clk, MaxSlotsPerStep: 16}
	return e
}

// flight writes one flight with counts[i] records of stream i.
func (e *env) flight(counts []int, copies int) {
	e.t.Helper()
	if _, err := e.star.Flight(e.t.Context(), e.ids, counts, e.ts, 24, copies); err != nil {
		e.t.Fatal(err)
	}
	e.ts += 10
}

func (e *env) flights(n int) {
	e.t.Helper()
	counts := make([]int, len(e.ids))
	for i := range counts {
		counts[i] = 1 + i%2
	}
	for range n {
		e.flight(counts, 0)
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

// settleAll absorbs and settles everything released.
func (e *env) settleAll() {
	e.t.Helper()
	ctx := e.t.Context()
	for range 100 {
		at, err := e.a.Run(ctx, chainX, e.star.Released())
		if err != nil {
			e.t.Fatal(err)
		}
		if !at.Less(e.star.Released()) {
			break
		}
	}
	for range 100 {
		h := e.head()
		if h.Settled == h.Checkpoint {
			return
		}
		if _, err := e.s.Run(ctx, chainX); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Fatal("settle did not catch up")
}

func (e *env) trimAll() {
	e.t.Helper()
	for range 100 {
		h := e.head()
		if h.Trimmed == h.Settled {
			return
		}
		if _, err := e.tr.Run(e.t.Context(), chainX); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Fatal("trim did not catch up")
}

// check reads every stream back and compares it with what was written from
// seq `from[i]` on (retention may have dropped a prefix).
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

// chainObjects lists the slot objects left in every bucket, by kind.
func (e *env) chainObjects() (flights, poison int) {
	e.t.Helper()
	for _, b := range e.set.Buckets {
		keys, err := b.List(e.t.Context(), "chains/")
		if err != nil {
			e.t.Fatal(err)
		}
		for _, k := range keys {
			env, err := b.Get(e.t.Context(), k, 0, format.EnvelopeSize)
			if err != nil {
				e.t.Fatal(err)
			}
			p, err := format.ParseEnvelope(env)
			if err != nil {
				e.t.Fatal(err)
			}
			if p.Kind == format.KindPoison {
				poison++
			} else {
				flights++
			}
		}
	}
	return flights, poison
}

// deleting lists the deleting streams (off their names).
func (e *env) deleting() []metastore.Stream {
	e.t.Helper()
	sts, _, err := e.mem.ListDeleting(e.t.Context(), "", 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return sts
}

func cur(e, s uint64) metastore.Cursor { return metastore.Cursor{Epoch: e, Slot: s} }

func TestTrimDeletesSettledSlotsKeepsPoison(t *testing.T) {
	e := newEnv(t, 3, 0)
	e.flights(6)
	if err := e.star.Halt(t.Context(), 0); err != nil { // poison at 1/6 in all 3 buckets
		t.Fatal(err)
	}
	e.flights(5)
	e.settleAll()
	// Trim never passes the settled cursor: before settle, nothing goes.
	e.flights(3)
	e.trimAll()
	if h := e.head(); h.Trimmed != cur(2, 5) || h.Settled != cur(2, 5) {
		t.Fatalf("head %+v", h)
	}
	flights, poison := e.chainObjects()
	if flights != 3*3 || poison != 3 {
		t.Fatalf("left %d flight copies and %d poison, want 9 (the unsettled slots) and 3", flights, poison)
	}
	e.settleAll()
	e.trimAll()
	if flights, poison := e.chainObjects(); flights != 0 || poison != 3 {
		t.Fatalf("left %d flights, %d poison", flights, poison)
	}
	e.check()
	// Trim is idempotent.
	if res, err := e.tr.Step(t.Context(), chainX); err != nil || res.From != res.To {
		t.Fatalf("rerun: %+v, %v", res, err)
	}
}

func TestTrimKeepsForeignAndStopsOnUnavailableBucket(t *testing.T) {
	e := newEnv(t, 1, 0)
	e.flights(4)
	e.settleAll()
	// A bucket that does not answer fails the step before the cursor moves.
	down := objstore.NewInjector(1)
	set := e.set
	set.Buckets = []objstore.Bucket{e.set.Buckets[0], objstore.WithFaults(e.set.Buckets[1], down), e.set.Buckets[2]}
	tr := &trim.Trimmer{Meta: e.mem, Sets: absorb.Sets{Express: set}, Settled: e.settled}
	down.SetDown(true)
	if _, err := tr.Step(t.Context(), chainX); err == nil {
		t.Fatal("step with a bucket down succeeded")
	}
	if h := e.head(); h.Trimmed != cur(1, 0) {
		t.Fatalf("trimmed moved with a bucket down: %+v", h)
	}
	down.SetDown(false)
	if _, err := tr.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if h := e.head(); h.Trimmed != cur(1, 4) {
		t.Fatalf("head %+v", h)
	}
	e.check()
}

func TestRetention(t *testing.T) {
	const day = int64(24 * time.Hour / time.Millisecond)
	e := newEnv(t, 2, day)
	e.s.MergeBelowBytes = -1 // one settled object per settle run
	for range 4 {
		e.flights(3)
		e.settleAll()
		e.ts += day / 4
	}
	e.flights(2) // absorbed, not settled: never dropped by retention
	if _, err := e.a.Run(t.Context(), chainX, e.star.Released()); err != nil {
		t.Fatal(err)
	}
	refs := func() []metastore.Ref {
		r, err := e.mem.QueryRefs(t.Context(), e.ids[0].String(), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := refs()
	if len(before) != 5 {
		t.Fatalf("%d refs", len(before))
	}
	// Now is a day and a third after the first write: the first two settled
	// refs (written at +0 and +day/4) are older than a day, the third (+day/2)
	// is not.
	e.clk.Set(time.UnixMilli(1_700_000_000_000 + day + day/3))
	res, err := e.tr.Streams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after := refs()
	if res.Streams != 2 || len(after) != 3 || after[0].FirstSeq != before[2].FirstSeq || res.Objects != 4 {
		t.Fatalf("retention: %+v, refs %d (first at %d)", res, len(after), after[0].FirstSeq)
	}
	// The floor holds the first seq left: the stream never reopens below.
	if st, err := e.mem.GetStream(t.Context(), e.names[0]); err != nil || st.Floor != before[1].LastSeq+1 {
		t.Fatalf("floor %d (%v), want %d", st.Floor, err, before[1].LastSeq+1)
	}
	for _, r := range before[:2] {
		if _, err := e.settled.Head(t.Context(), r.Locations[0].Key); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("expired object %s: %v", r.Locations[0].Key, err)
		}
	}
	// Far in the future every settled ref has expired, but the transit ref
	// and the stream's last ref stay.
	e.clk.Set(time.UnixMilli(1_700_000_000_000 + 100*day))
	if _, err := e.tr.Streams(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := refs(); len(after) != 1 || after[0].FirstSeq != before[4].FirstSeq {
		t.Fatalf("refs after all expired: %+v", after)
	}
	e.settleAll()
	if _, err := e.tr.Streams(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := refs(); len(after) != 1 {
		t.Fatalf("the last ref was dropped: %+v", after)
	}
}

func TestDeletion(t *testing.T) {
	e := newEnv(t, 3, 0)
	e.flights(5)
	e.settleAll()
	e.flights(2)
	if _, err := e.a.Run(t.Context(), chainX, e.star.Released()); err != nil {
		t.Fatal(err)
	}
	victim := e.ids[1]
	keys, _ := e.settled.List(t.Context(), "streams/"+victim.String())
	if len(keys) == 0 {
		t.Fatal("no settled objects to delete")
	}
	if err := e.mem.SetStreamState(t.Context(), e.names[1], victim.String(), metastore.StreamDeleting); err != nil {
		t.Fatal(err)
	}
	h := &trim.Handler{Trimmer: e.tr, Chains: []metastore.ChainID{chainX}}
	raw, err := os.ReadFile("testdata/scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // redelivered: idempotent
		if _, err := h.Handle(t.Context(), raw); err != nil {
			t.Fatal(err)
		}
	}
	if left := e.deleting(); len(left) != 0 {
		t.Fatalf("deleting streams left: %+v", left)
	}
	if refs, _ := e.mem.QueryRefs(t.Context(), victim.String(), 0, 10); len(refs) != 0 {
		t.Fatalf("refs left: %+v", refs)
	}
	if keys, _ := e.settled.List(t.Context(), "streams/"+victim.String()); len(keys) != 0 {
		t.Fatalf("objects left: %v", keys)
	}
	// The others are intact.
	for _, i := range []int{0, 2} {
		got, err := absorbtest.ReadStream(t.Context(), e.mem, e.set, e.settled, e.ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := absorbtest.Equal(got, e.star.Written(e.ids[i])); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Handle(t.Context(), []byte(`{"Records":[]}`)); err == nil || !strings.Contains(err.Error(), "unrecognised") {
		t.Fatalf("trim took an SQS event: %v", err)
	}
}

// mergeFirst is a metastore wrapper that runs a hook once, before the
// first DeleteRefs it forwards: a settle merge landing between trim's read
// and its delete.
type mergeFirst struct {
	metastore.Store
	hook func()
}

func (m *mergeFirst) DeleteRefs(ctx context.Context, refs []metastore.Ref) error {
	if h := m.hook; h != nil {
		m.hook = nil
		h()
	}
	return m.Store.DeleteRefs(ctx, refs)
}

// TestRetentionRacesSettleMerge: settle merges the expired ref P with the
// stream's last ref R into M, stored at P's key, after trim read the refs
// and before it deletes P. Trim must not delete M (issue 13, finding 1:
// with a delete by key it did, losing records inside retention and the
// stream's tail).
func TestRetentionRacesSettleMerge(t *testing.T) {
	const day = int64(24 * time.Hour / time.Millisecond)
	e := newEnv(t, 1, day)
	e.s.MergeBelowBytes = -1
	e.flights(2)
	e.settleAll()
	e.ts += day / 2
	e.flights(2)
	e.settleAll()
	id := e.ids[0].String()
	refs, err := e.mem.QueryRefs(t.Context(), id, 0, 10)
	if err != nil || len(refs) != 2 {
		t.Fatalf("refs %+v, %v", refs, err)
	}
	p, r := refs[0], refs[1]
	merged := metastore.Ref{StreamID: id, FirstSeq: p.FirstSeq, LastSeq: r.LastSeq, FirstTsMs: p.FirstTsMs, LastTsMs: r.LastTsMs,
		Bytes: p.Bytes + r.Bytes, Locations: append(append([]metastore.Location(nil), p.Locations...), r.Locations...)}
	m := &mergeFirst{Store: e.mem, hook: func() {
		if err := e.mem.SwapRefs(t.Context(), []metastore.Ref{p, r}, merged); err != nil {
			t.Errorf("merge: %v", err)
		}
	}}
	tr := &trim.Trimmer{Meta: m, Sets: absorb.Sets{Express: e.set}, Settled: e.settled, Clock: e.clk}
	e.clk.Set(time.UnixMilli(1_700_000_000_000 + day + day/4)) // P expired, R not
	res, err := tr.Streams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after, err := e.mem.QueryRefs(t.Context(), id, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 || !metastore.EqualRef(after[0], merged) {
		t.Fatalf("refs after trim raced a merge: %+v (result %+v), want the merged ref", after, res)
	}
	if res.RefsDropped != 0 || res.Objects != 0 || res.Conflicts != 1 {
		t.Fatalf("result %+v, want nothing dropped and one conflict", res)
	}
	e.check()
	// The next run sees M, which is not expired: nothing goes.
	if res, err := tr.Streams(t.Context()); err != nil || res.RefsDropped != 0 {
		t.Fatalf("second run: %+v, %v", res, err)
	}
	e.check()
}

// TestExplicitTrim: a stream without retention whose last ref carries a
// trim point (a Trim command) loses its settled refs that end below it,
// then their objects; a ref reaching the trim point, refs still in
// transit, and the last ref stay.
func TestExplicitTrim(t *testing.T) {
	e := newEnv(t, 1, 0)
	e.s.MergeBelowBytes = -1 // one settled object per settle run
	for range 4 {
		e.flights(3)
		e.settleAll()
	}
	e.flights(2) // absorbed, not settled
	if _, err := e.a.Run(t.Context(), chainX, e.star.Released()); err != nil {
		t.Fatal(err)
	}
	id := e.ids[0].String()
	refs := func() []metastore.Ref {
		r, err := e.mem.QueryRefs(t.Context(), id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := refs()
	if len(before) != 5 {
		t.Fatalf("%d refs", len(before))
	}
	// Nothing to trim without a trim point.
	if res, err := e.tr.Streams(t.Context()); err != nil || res.RefsDropped != 0 {
		t.Fatalf("no trim point: %+v %v", res, err)
	}
	// The trim point inside the third ref: the first two go.
	last := before[4]
	withTrim := last
	withTrim.Commands = &format.StreamCommands{TrimSeq: before[2].FirstSeq + 1}
	if err := e.mem.SwapRefs(t.Context(), []metastore.Ref{last}, withTrim); err != nil {
		t.Fatal(err)
	}
	res, err := e.tr.Streams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after := refs()
	if len(after) != 3 || after[0].FirstSeq != before[2].FirstSeq || res.RefsDropped != 2 || res.Objects != 2 {
		t.Fatalf("explicit trim: %+v, %d refs from %d", res, len(after), after[0].FirstSeq)
	}
	for _, r := range before[:2] {
		if _, err := e.settled.Head(t.Context(), r.Locations[0].Key); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("trimmed object %s: %v", r.Locations[0].Key, err)
		}
	}
	if st, err := e.mem.GetStream(t.Context(), e.names[0]); err != nil || st.Floor != before[1].LastSeq+1 {
		t.Fatalf("floor %d (%v), want %d", st.Floor, err, before[1].LastSeq+1)
	}
	// A trim point past everything: the settled refs go, the transit ref
	// (the last) stays.
	cur := refs()[2]
	past := cur
	past.Commands = &format.StreamCommands{TrimSeq: 1 << 40}
	if err := e.mem.SwapRefs(t.Context(), []metastore.Ref{cur}, past); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tr.Streams(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := refs(); len(after) != 1 || after[0].FirstSeq != before[4].FirstSeq {
		t.Fatalf("refs after trimming past the end: %d", len(after))
	}
}

// TestDeletionWaitsForTheWindow: with the pass index, a deleting stream's
// parts still in the window would become refs after its metadata went (to
// nobody); trim waits until settle has made them refs, then deletes them
// and the metadata.
func TestDeletionWaitsForTheWindow(t *testing.T) {
	for _, max := range []int64{0, 1} { // 1: a window cache smaller than a pass
		t.Run(fmt.Sprintf("window-cache=%d", max), func(t *testing.T) { testDeletionWaitsForTheWindow(t, max) })
	}
}

func testDeletionWaitsForTheWindow(t *testing.T, windowMax int64) {
	e := newEnv(t, 2, 0)
	e.a.Index, e.s.PassIndex, e.tr.PassIndex = e.settled, true, true
	e.tr.Window = &passindex.Window{Meta: e.mem, Bucket: e.settled, MaxBytes: windowMax}
	e.flights(3)
	e.settleAll()
	e.flights(2)
	if _, err := e.a.Run(t.Context(), chainX, e.star.Released()); err != nil {
		t.Fatal(err)
	}
	victim := e.ids[1]
	if err := e.mem.SetStreamState(t.Context(), e.names[1], victim.String(), metastore.StreamDeleting); err != nil {
		t.Fatal(err)
	}
	res, err := e.tr.Streams(t.Context())
	if err != nil || res.Waiting != 1 || res.Deleted != 0 {
		t.Fatalf("with parts in the window: %+v, %v", res, err)
	}
	if left := e.deleting(); len(left) != 1 || left[0].ID != victim.String() {
		t.Fatalf("metadata gone while parts were in the window: deleting %+v", left)
	}
	e.settleAll()
	// Settled into runs, not yet flushed: still in the window.
	if res, err = e.tr.Streams(t.Context()); err != nil || res.Waiting != 1 || res.Deleted != 0 {
		t.Fatalf("after settle into runs: %+v, %v", res, err)
	}
	// A later step finds the victim's runs FlushAge old and flushes them.
	e.s.FlushAge = 15 * time.Millisecond // flights are 10 ms apart
	e.flight([]int{1, 0}, 0)
	e.settleAll()
	if res, err = e.tr.Streams(t.Context()); err != nil || res.Waiting != 0 || res.Deleted != 1 {
		t.Fatalf("after the flush: %+v, %v", res, err)
	}
	if refs, _ := e.mem.QueryRefs(t.Context(), victim.String(), 0, 10); len(refs) != 0 {
		t.Fatalf("refs left: %+v", refs)
	}
	if left := e.deleting(); len(left) != 0 {
		t.Fatalf("deleting streams left: %+v", left)
	}
}

// TestTrimDeletesFlushedRuns: trim deletes the runs and packs below the
// flushed cursor (and the packs of a plan nobody adopted there), and keeps
// the live runs [flushed, settled) and their packs.
func TestTrimDeletesFlushedRuns(t *testing.T) {
	e := newEnv(t, 3, 0)
	e.a.Index, e.s.PassIndex, e.tr.PassIndex = e.settled, true, true
	e.s.MaxSlotsPerStep = 2
	e.a.MaxSlotsPerPass = 2
	e.s.FlushAge = 35 * time.Millisecond // flights are 10 ms apart
	e.flights(8)                         // runs at 1/0 1/2 1/4 1/6
	e.settleAll()
	h := e.head()
	if h.Flushed == h.Settled || h.Flushed == cur(1, 0) {
		t.Fatalf("head %+v: want some runs flushed and some live", h)
	}
	// A plan of the run at 1/0 nobody adopted (a copy that crashed before
	// its run index): its pack is garbage below flushed.
	// Both key forms: a plan without a digest (written before digests)
	// and one with (design 014, "One commit point per step").
	for _, orphan := range []string{format.PackKey(chainX.Star, "express", 1, 0, 1, 0, 0), format.PackKey(chainX.Star, "express", 1, 0, 1, 0xabcd, 0)} {
		if err := e.settled.PutIfAbsent(t.Context(), orphan, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// Command indexes (design 014, "The command index") beside a run
	// below flushed and beside a live run: the first goes with its run,
	// the second stays.
	deadCmdx := format.CommandIndexKey(format.RunIndexKey(chainX.Star, "express", 1, 0))
	liveCmdx := format.CommandIndexKey(format.RunIndexKey(chainX.Star, "express", 1, h.Flushed.Slot))
	for _, k := range []string{deadCmdx, liveCmdx} {
		if err := e.settled.PutIfAbsent(t.Context(), k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	e.trimAll()
	runs, err := e.settled.List(t.Context(), "index/star-0/express/runs/")
	if err != nil {
		t.Fatal(err)
	}
	packs, err := e.settled.List(t.Context(), "packs/")
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for at := h.Flushed; at.Less(h.Settled); at.Slot += 2 {
		live++
		if !slices.Contains(runs, format.RunIndexKey(chainX.Star, "express", 1, at.Slot)) {
			t.Fatalf("live run at %s deleted: %v", at, runs)
		}
	}
	if slices.Contains(runs, deadCmdx) || !slices.Contains(runs, liveCmdx) {
		t.Fatalf("after trim: runs %v: want %s gone and %s kept", runs, deadCmdx, liveCmdx)
	}
	runs = slices.DeleteFunc(runs, func(k string) bool { return k == liveCmdx })
	if len(runs) != live || len(packs) != live {
		t.Fatalf("after trim: runs %v, packs %v: want the %d live ones", runs, packs, live)
	}
	// Reads still find everything: refs, then the live runs.
	w := &passindex.Window{Meta: e.mem, Bucket: e.settled}
	for _, id := range e.ids {
		got, err := absorbtest.ReadStream(t.Context(), e.mem, e.set, e.settled, id)
		if err != nil {
			t.Fatal(err)
		}
		parts, err := w.HeadRefs(t.Context(), chainX, e.head(), id, uint64(len(got)))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			recs, err := absorbtest.ReadRef(t.Context(), e.set, e.settled, p)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, recs...)
		}
		if err := absorbtest.Equal(got, e.star.Written(id)); err != nil {
			t.Fatalf("stream %s: %v", id, err)
		}
	}
}

// slowGets is a bucket whose Gets take a while and count how many are in
// flight at once.
type slowGets struct {
	objstore.Bucket
	in, most *atomic.Int64
}

func (b slowGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	now := b.in.Add(1)
	defer b.in.Add(-1)
	for {
		m := b.most.Load()
		if now <= m || b.most.CompareAndSwap(m, now) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond)
	return b.Bucket.Get(ctx, key, off, n)
}

// TestTrimReadsSlotsInParallel: a step trims several slots at once (their
// envelope reads overlap), not one GET after another, and still deletes
// every settled flight copy and moves the cursor over all of them (issue
// 36: one slot at a time trimmed about 100 slots a second behind S3's
// latency, below what a star cuts). Fails before: one GET in flight.
func TestTrimReadsSlotsInParallel(t *testing.T) {
	e := newEnv(t, 2, 0)
	e.flights(40)
	e.settleAll()
	var in, most atomic.Int64
	set := e.set
	set.Buckets = nil
	for _, b := range e.set.Buckets {
		set.Buckets = append(set.Buckets, slowGets{Bucket: b, in: &in, most: &most})
	}
	tr := &trim.Trimmer{Meta: e.mem, Sets: absorb.Sets{Express: set}, Settled: e.settled}
	if _, err := tr.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if h := e.head(); h.Trimmed != h.Settled {
		t.Fatalf("trimmed %v, settled %v", h.Trimmed, h.Settled)
	}
	if flights, _ := e.chainObjects(); flights != 0 {
		t.Fatalf("%d flight copies left", flights)
	}
	if most.Load() < 2 {
		t.Fatalf("at most %d envelope read in flight: slots trimmed one at a time", most.Load())
	}
	e.check()
}
