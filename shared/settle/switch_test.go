package settle_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/trim"
)

// Tests of design 014's "Switching a live chain": a chain absorbed in
// refs mode, with unsettled passes, switched to the pass index.

// checkFrom reads every stream the way the read path does
// (passindex.Window.QueryRefs: refs until an empty page, then the window) from
// every seq, and finds every record by timestamp in the window's parts
// (HeadRefsAt) when the window holds it: exactly what the star wrote.
func (e *env) checkFrom() {
	e.t.Helper()
	ctx := e.t.Context()
	w := &passindex.Window{Meta: e.s.Meta, Bucket: e.settled}
	h, err := e.s.Meta.GetHead(ctx, chainX)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, id := range e.ids {
		st := metastore.Stream{Name: "s-" + id.String(), ID: id.String(), Star: chainX.Star, Class: chainX.Class}
		want := e.star.Written(id)
		for from := uint64(0); from < uint64(len(want)); from++ {
			var got []format.Record
			for at := from; ; {
				refs, err := w.QueryRefs(ctx, st, at, 7)
				if err != nil {
					e.t.Fatalf("stream %s from %d: %v", id, from, err)
				}
				if len(refs) == 0 {
					break
				}
				for _, r := range refs {
					if r.FirstSeq > at || r.LastSeq < at {
						e.t.Fatalf("stream %s from %d: part %d-%d at %d", id, from, r.FirstSeq, r.LastSeq, at)
					}
					recs, err := absorbtest.ReadRef(ctx, e.set, e.settled, r)
					if err != nil {
						e.t.Fatal(err)
					}
					got = append(got, recs[at-r.FirstSeq:]...)
					at = r.LastSeq + 1
				}
			}
			if err := absorbtest.Equal(got, want[from:]); err != nil {
				e.t.Fatalf("stream %s from seq %d (head %+v): %v", id, from, h, err)
			}
		}
		refs, err := e.mem.QueryRefs(ctx, id.String(), 0, 1000)
		if err != nil {
			e.t.Fatal(err)
		}
		var behind uint64 // seqs behind refs
		if len(refs) > 0 {
			behind = refs[len(refs)-1].LastSeq + 1
		}
		for s := behind; s < uint64(len(want)); s++ {
			parts, err := w.HeadRefsAt(ctx, chainX, h, id, want[s].TimestampMs)
			if err != nil || len(parts) == 0 {
				e.t.Fatalf("stream %s by timestamp %d: %v, %v", id, want[s].TimestampMs, parts, err)
			}
			// The first part holds the first record at or after the
			// timestamp (or starts at it).
			first := uint64(0)
			for first < uint64(len(want)) && want[first].TimestampMs < want[s].TimestampMs {
				first++
			}
			if p := parts[0]; max(first, behind) < p.FirstSeq || max(first, behind) > p.LastSeq {
				e.t.Fatalf("stream %s by timestamp %d: first part %d-%d, want it to hold seq %d", id, want[s].TimestampMs, p.FirstSeq, p.LastSeq, max(first, behind))
			}
		}
	}
}

// TestSwitchLiveChain: a chain absorbed in refs mode, part settled, with
// refs passes in its window; the settle switched on first (a rolling
// deploy: the Lambdas before the star), then the absorb. Settle settles
// the refs passes in refs mode, then runs from Head.Indexed; trim deletes
// the slots; every record reads back by seq from every seq and by
// timestamp at every stage. On main the first settle step on the switch
// stopped with passindex.ErrWindow (no pass index at the settled cursor).
func TestSwitchLiveChain(t *testing.T) {
	e := newEnv(t, 4, nil)
	e.s.MaxSlotsPerStep = 3
	tr := &trim.Trimmer{Meta: e.mem, Sets: absorb.Sets{Express: e.set}, Settled: e.settled, Clock: clock.Real{}}
	// Refs mode: passes [0,4) [4,8) [8,10), one settle step [0,3).
	e.flights(10)
	e.absorbAll()
	if _, err := e.s.Step(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	e.checkFrom()
	// The settle switches first (the star's absorb still in refs mode):
	// a refs step, which moves flushed with settled.
	e.s.PassIndex, tr.PassIndex = true, true
	e.s.FlushBytes = 1 << 10
	res, err := e.s.Step(t.Context(), chainX)
	if err != nil {
		t.Fatalf("settle on, absorb off: %v", err)
	}
	if h := e.head(); !h.Indexed.IsZero() || h.Settled != cur(1, 6) || h.Flushed != h.Settled || res.Packed != 0 {
		t.Fatalf("head after a refs step with the switch on: %+v (%+v)", h, res)
	}
	e.flights(3)
	e.absorbAll() // still refs: [10,13)
	e.checkFrom()
	// The absorb switches: its first pass records where indexing begins.
	e.a.Index = e.settled
	e.flights(9)
	e.absorbAll() // indexed: [13,17) [17,21) [21,22)
	h := e.head()
	if h.Indexed != cur(1, 13) || h.Checkpoint != cur(1, 22) || h.Settled != cur(1, 6) {
		t.Fatalf("head after the switch: %+v", h)
	}
	e.checkFrom()
	e.checkMixed()
	// Settle: refs steps [6,9) [9,12) [12,13) (bounded at indexed), then
	// runs from 13: never ErrWindow.
	var steps []settleStep
	for {
		res, err := e.s.Step(t.Context(), chainX)
		if err != nil {
			t.Fatalf("settle after the switch: %v (steps %+v)", err, steps)
		}
		if res.From == res.To {
			break
		}
		steps = append(steps, settleStep{res.From, res.To, res.Packed + res.Flushes})
		e.checkFrom()
		e.checkMixed()
		if _, err := tr.Run(t.Context(), chainX); err != nil {
			t.Fatalf("trim: %v", err)
		}
		e.checkFrom()
	}
	want := []settleStep{{cur(1, 6), cur(1, 9), 0}, {cur(1, 9), cur(1, 12), 0}, {cur(1, 12), cur(1, 13), 0}}
	if len(steps) < 4 || steps[0] != want[0] || steps[1] != want[1] || steps[2] != want[2] || steps[3].from != cur(1, 13) || steps[3].entries == 0 {
		t.Fatalf("settle steps %+v, want %+v then runs from 1/13", steps, want)
	}
	if h := e.head(); h.Settled != cur(1, 22) || h.Flushed.Less(h.Indexed) || h.Trimmed != h.Settled {
		t.Fatalf("head at the end: %+v", h)
	}
	// Later passes and steps go on indexed.
	e.flights(5)
	e.absorbAll()
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	e.checkFrom()
	e.checkMixed()
}

type settleStep struct {
	from, to metastore.Cursor
	entries  int // run entries written (packed or flushed)
}

// TestSwitchOffRefused: a chain once indexed does not go back to refs:
// the absorb, settle and trim with the switch off stop with
// absorb.ErrIndexed, naming the fix, and write nothing; settle still
// settles the refs passes below Head.Indexed.
func TestSwitchOffRefused(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.s.MaxSlotsPerStep = 100
	e.flights(6)
	e.absorbAll() // refs [0,4) [4,6)
	e.a.Index = e.settled
	e.flights(4)
	e.absorbAll() // indexed from 6
	if h := e.head(); h.Indexed != cur(1, 6) {
		t.Fatalf("head %+v", h)
	}
	// Off again.
	e.a.Index = nil
	e.flights(2)
	before := e.head()
	if _, err := e.a.Pass(t.Context(), chainX, e.star.Released()); !errors.Is(err, absorb.ErrIndexed) {
		t.Fatalf("absorb off on an indexed chain: %v, want ErrIndexed", err)
	}
	if h := e.head(); h != before {
		t.Fatalf("the refused absorb moved the head: %+v, was %+v", h, before)
	}
	// Settle off: the refs part [0,6) settles, then the indexed step is
	// refused.
	res, err := e.s.Step(t.Context(), chainX)
	if err != nil || res.To != cur(1, 6) {
		t.Fatalf("settle off, the refs part: %+v, %v", res, err)
	}
	if _, err := e.s.Step(t.Context(), chainX); !errors.Is(err, absorb.ErrIndexed) {
		t.Fatalf("settle off at indexed: %v, want ErrIndexed", err)
	}
	tr := &trim.Trimmer{Meta: e.mem, Sets: absorb.Sets{Express: e.set}, Settled: e.settled, Clock: clock.Real{}}
	if _, err := tr.Step(t.Context(), chainX); !errors.Is(err, absorb.ErrIndexed) {
		t.Fatalf("trim off: %v, want ErrIndexed", err)
	}
	// On again: everything goes on.
	e.a.Index, e.s.PassIndex, tr.PassIndex = e.settled, true, true
	e.absorbAll()
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	e.checkFrom()
	e.checkMixed()
}

// hideIndexed shows heads as stored before Head.Indexed existed (0/0)
// until the absorb records it (AdvanceCursor of Indexed, taken as done:
// the store's cursor is where the chain's indexing really began).
type hideIndexed struct {
	metastore.Store
	mu       sync.Mutex
	hide     bool
	recorded metastore.Cursor
}

func (m *hideIndexed) mask(h metastore.Head) metastore.Head {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hide {
		h.Indexed = metastore.Cursor{}
	}
	return h
}

func (m *hideIndexed) GetHead(ctx context.Context, c metastore.ChainID) (metastore.Head, error) {
	h, err := m.Store.GetHead(ctx, c)
	return m.mask(h), err
}

func (m *hideIndexed) BeginAbsorb(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor) (metastore.Head, error) {
	h, err := m.Store.BeginAbsorb(ctx, c, from, to)
	return m.mask(h), err
}

func (m *hideIndexed) AdvanceCursor(ctx context.Context, c metastore.ChainID, k metastore.CursorKind, from, to metastore.Cursor) error {
	if k == metastore.Indexed {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.hide {
			return m.Store.AdvanceCursor(ctx, c, k, from, to)
		}
		m.hide, m.recorded = false, to
		return nil
	}
	return m.Store.AdvanceCursor(ctx, c, k, from, to)
}

// TestSwitchChainIndexedBefore: a chain run on the pass index before
// Head.Indexed existed (its head reads it as 0/0; runs and passes in its
// window) is read, settled and absorbed as indexed from its window's
// start (passindex.Window.IndexedFrom), never in refs mode; the absorb records
// the cursor, at the checkpoint, once the window is empty.
func TestSwitchChainIndexedBefore(t *testing.T) {
	var hide *hideIndexed
	e := newEnv(t, 4, func(m metastore.Store) metastore.Store { hide = &hideIndexed{Store: m}; return hide })
	e.withIndex()
	e.s.MaxSlotsPerStep = 3
	e.s.FlushBytes = 1 << 10
	e.flights(10)
	e.absorbAll()
	for range 2 {
		if _, err := e.s.Step(t.Context(), chainX); err != nil {
			t.Fatal(err)
		}
	}
	e.flights(6)
	e.absorbAll()
	h := e.head()
	if h.Indexed != cur(1, 0) || !h.Flushed.Less(h.Settled) || !h.Settled.Less(h.Checkpoint) {
		t.Fatalf("head %+v: want runs and passes in the window", h)
	}
	hide.mu.Lock()
	hide.hide = true
	hide.mu.Unlock()
	e.checkFrom()
	// Settle while the head has no Indexed: run steps, not refs steps.
	res, err := e.s.Step(t.Context(), chainX)
	if err != nil || res.Packed+res.Flushes == 0 {
		t.Fatalf("settle on a head without Indexed: %+v, %v; want a run step", res, err)
	}
	e.checkFrom()
	// The absorb goes on indexing (no refs), and records nothing while
	// the window below the checkpoint is not empty.
	e.flights(3)
	e.absorbAll()
	if hide.recorded != (metastore.Cursor{}) {
		t.Fatalf("the absorb recorded indexing from %s with a window below the checkpoint", hide.recorded)
	}
	for i := range e.ids {
		if refs := e.refs(i); len(refs) > 0 && !settledOnly(refs[len(refs)-1]) {
			t.Fatalf("stream %d: the absorb wrote refs on an indexed chain: %+v", i, refs)
		}
	}
	e.checkFrom()
	// Everything flushed: the window is empty, and the next pass records
	// the cursor at the checkpoint.
	e.s.FlushBytes = 1
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	h = e.head()
	if h.Flushed != h.Settled || h.Settled != h.Checkpoint {
		t.Fatalf("head %+v: want the window empty", h)
	}
	e.flights(2)
	e.absorbAll()
	if hide.recorded != h.Checkpoint {
		t.Fatalf("the absorb recorded indexing from %s, want the checkpoint %s", hide.recorded, h.Checkpoint)
	}
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	e.checkFrom()
	e.checkMixed()
}

// settledOnly reports whether every location of r is settled.
func settledOnly(r metastore.Ref) bool {
	for _, l := range r.Locations {
		if !l.Settled {
			return false
		}
	}
	return true
}

// TestSwitchWaitsForSettle: an absorb with the switch on does not index a
// chain that a settle without it (a build before the switch, or one with
// it off) has settled since its flushed cursor: such a settle would take
// an indexed pass for refs and move the settled cursor over records no
// ref holds. It goes on with refs until a settle with the switch on has
// settled a step (moving flushed with settled), then switches.
func TestSwitchWaitsForSettle(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.s.MaxSlotsPerStep = 4
	e.flights(6)
	e.absorbAll()
	if _, err := e.s.Step(t.Context(), chainX); err != nil { // settle off: flushed stays
		t.Fatal(err)
	}
	e.a.Index = e.settled
	e.flights(3)
	e.absorbAll()
	if h := e.head(); !h.Indexed.IsZero() || h.Flushed == h.Settled {
		t.Fatalf("head %+v: the absorb switched before a settle with the switch on settled a step", h)
	}
	// An old settle now is harmless: every pass has refs.
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	e.checkFrom()
	e.s.PassIndex = true
	e.flights(3)
	e.absorbAll() // still refs: flushed is behind
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	h := e.head()
	if !h.Indexed.IsZero() || h.Flushed != h.Settled || h.Settled != h.Checkpoint {
		t.Fatalf("head %+v: want refs settled by a settle with the switch on", h)
	}
	e.flights(4)
	e.absorbAll()
	if got := e.head(); got.Indexed != h.Checkpoint {
		t.Fatalf("head %+v: want indexed from %s", got, h.Checkpoint)
	}
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	e.checkFrom()
	e.checkMixed()
}
