package settle_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/settle"
)

// newestRecordMs is the latest timestamp of every record written.
func (e *env) newestRecordMs() int64 {
	var n int64
	for _, id := range e.ids {
		for _, r := range e.star.Written(id) {
			n = max(n, r.TimestampMs)
		}
	}
	return n
}

// TestHandlerQuietChain (issue 30, ADR 0057): the settle Lambda's
// scheduled event (testdata/scheduled.json) on a chain with no new
// passes still steps. Its runs stay live while the newest record is less
// than FlushAge older than the clock (1 ms short: nothing moves), and at
// exactly FlushAge every stream is flushed behind a ref, the merged and
// flushed cursors reach the settled one and every record reads from refs
// alone. Without the settler's clock the quiet chain stays as it is
// (the behaviour before, for every deployment: a quiet chain's runs
// waited for its next append).
func TestHandlerQuietChain(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.withIndex()
	e.s.MaxSlotsPerStep = 2
	const age = time.Hour
	e.s.FlushAge = age
	clk := clock.NewManual(time.UnixMilli(e.ts))
	h := &settle.Handler{Settler: e.s, Chains: []metastore.ChainID{chainX}}
	raw, err := os.ReadFile("testdata/scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	handle := func(what string) metastore.Head {
		t.Helper()
		if _, err := h.Handle(t.Context(), raw); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return e.head()
	}
	e.flights(6)
	e.absorbAll()
	before := handle("the first event")
	if before.Settled != e.star.Released() || before.Flushed == before.Settled {
		t.Fatalf("head %+v after the first event: want everything settled into live runs (released %s)", before, e.star.Released())
	}
	newest := e.newestRecordMs()
	for _, c := range []struct {
		what  string
		clock clock.Clock
		at    int64
	}{
		{"no clock", nil, newest + 10*age.Milliseconds()},
		{"1 ms short of FlushAge", clk, newest + age.Milliseconds() - 1},
	} {
		e.s.Clock = c.clock
		clk.Set(time.UnixMilli(c.at))
		if got := handle(c.what); got != before {
			t.Fatalf("%s: head %+v, want it unchanged %+v", c.what, got, before)
		}
		for i := range e.ids {
			if n := len(e.refs(i)); n != 0 {
				t.Fatalf("%s: stream %d has %d refs", c.what, i, n)
			}
		}
	}
	clk.Set(time.UnixMilli(newest + age.Milliseconds()))
	after := handle("at FlushAge")
	if after.Flushed != before.Settled || after.Merged != before.Settled || after.Settled != before.Settled {
		t.Fatalf("at FlushAge: head %+v, want flushed and merged at settled %s", after, before.Settled)
	}
	e.check() // refs alone
	e.checkSettled()
	e.checkMixed()
	if again := handle("once more"); again != after {
		t.Fatalf("a quiet step after the flush moved the head: %+v, was %+v", again, after)
	}
}

// TestQuietFlushBounded: a quiet flush writes at most MaxAgeFlushes
// streams' flushes a call, oldest run first, then by id, and moves the
// flushed cursor only in the call that finds every stream held: with the
// bound at the number of streams one call does it all, one below it two
// calls (the second writes the last stream's and moves the cursor).
func TestQuietFlushBounded(t *testing.T) {
	const streams = 4
	for _, c := range []struct{ bound, calls int }{{streams, 1}, {streams - 1, 2}, {1, streams}} {
		e := newEnv(t, streams, nil)
		e.withIndex()
		e.s.MaxSlotsPerStep = 2
		e.s.MaxAgeFlushes = c.bound
		e.flights(4)
		e.absorbAll()
		if _, err := e.s.Run(t.Context(), chainX); err != nil {
			t.Fatal(err)
		}
		before := e.head()
		e.s.Clock = clock.NewManual(time.UnixMilli(e.newestRecordMs() + settle.DefaultFlushAge.Milliseconds()))
		for call := 1; call <= c.calls; call++ {
			if _, err := e.s.Step(t.Context(), chainX); err != nil {
				t.Fatal(err)
			}
			held := min(call*c.bound, streams)
			for i := range e.ids {
				if got, want := len(e.refs(i)) > 0, i < held; got != want {
					t.Fatalf("bound %d, call %d: stream %d has refs %t, want %t (by id, %d a call)", c.bound, call, i, got, want, c.bound)
				}
			}
			h := e.head()
			if done := h.Flushed == before.Settled; done != (call == c.calls) {
				t.Fatalf("bound %d, call %d of %d: head %+v: flushed at settled %t", c.bound, call, c.calls, h, done)
			}
		}
		e.check()
	}
}

// hookMeta calls onAdvance (nil: none) before each AdvanceCursor.
type hookMeta struct {
	metastore.Store
	onAdvance func(kind metastore.CursorKind)
}

func (m *hookMeta) AdvanceCursor(ctx context.Context, c metastore.ChainID, kind metastore.CursorKind, from, to metastore.Cursor) error {
	if m.onAdvance != nil {
		m.onAdvance(kind)
	}
	return m.Store.AdvanceCursor(ctx, c, kind, from, to)
}

func (m *hookMeta) MoveCursors(ctx context.Context, c metastore.ChainID, moves []metastore.CursorMove) error {
	for _, mv := range moves {
		if m.onAdvance != nil && mv.From != mv.To {
			m.onAdvance(mv.Kind)
		}
	}
	return m.Store.MoveCursors(ctx, c, moves)
}

// TestQuietFlushSealRace: a quiet flush Q reads an idle head; right
// before its seal a new flight is absorbed and a copy P plans on it
// (stream 1 packed, not flushed: its clock is record time), merges (its
// group: Q's live run and its own, Fanout 2) and is held before its
// commit; then Q's seal, conditioned on the checkpoint still at the
// settled cursor, fails: Q is Lost and writes no ref, and P commits its
// step, merge included. The race it closes: a seal that lands between
// P's merge and its commit (ADR 0057's checkUnsealed left the time
// between its head read and its merged run's put) would let Q's refs end
// inside a segment P's merge compacted ("ref or part at 0, want 2" on
// every read of stream 0, and on its next flush).
func TestQuietFlushSealRace(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.withIndex()
	conf := func(s *settle.Settler) {
		s.PassIndex, s.Fanout, s.FlushBytes, s.FlushAge, s.MaxSlotsPerStep = true, 2, 1<<30, time.Hour, 64
	}
	conf(e.s)
	e.flights(2)
	e.absorbAll()
	e.step() // the run r1: both streams packed
	reached, release, pDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	pMeta := &hookMeta{Store: e.mem}
	pMeta.onAdvance = func(kind metastore.CursorKind) {
		if kind == metastore.Settled {
			pMeta.onAdvance = nil
			close(reached)
			<-release
		}
	}
	p := &settle.Settler{Meta: pMeta, Sets: absorb.Sets{Express: e.set}, Settled: e.settled}
	conf(p)
	qMeta := &hookMeta{Store: e.mem}
	qMeta.onAdvance = func(kind metastore.CursorKind) {
		if kind == metastore.Merged { // Q's seal: P has read the head and planned
			qMeta.onAdvance = nil
			e.flights(1)
			e.absorbAll()
			go func() { _, err := p.Step(context.Background(), chainX); pDone <- err }()
			<-reached
		}
	}
	q := &settle.Settler{Meta: qMeta, Sets: absorb.Sets{Express: e.set}, Settled: e.settled, MaxAgeFlushes: 1,
		Clock: clock.NewManual(time.UnixMilli(e.newestRecordMs() + 2*time.Hour.Milliseconds()))}
	conf(q)
	q.MaxAgeFlushes = 1
	if res, err := q.Step(t.Context(), chainX); err != nil || !res.Lost {
		t.Fatalf("the quiet flush: %+v, %v: want it lost to the new pass", res, err)
	}
	if len(e.refs(0)) != 0 || len(e.refs(1)) != 0 {
		t.Fatalf("the lost quiet flush wrote refs: %d and %d", len(e.refs(0)), len(e.refs(1)))
	}
	close(release)
	if err := <-pDone; err != nil {
		t.Fatalf("the planning copy: %v", err)
	}
	if h := e.head(); h.Settled != h.Checkpoint || h.Merged != h.Settled {
		t.Fatalf("head %+v: want P's step and merge committed", h)
	}
	e.checkMixed()
	// And the chain still settles and flushes, quiet.
	for i := 0; ; i++ {
		h := e.head()
		if h.Flushed == h.Settled && h.Settled == h.Checkpoint {
			break
		}
		if i == 8 {
			t.Fatalf("not flushed after %d quiet steps: %+v", i, h)
		}
		if _, err := q.Step(t.Context(), chainX); err != nil {
			t.Fatalf("quiet step %d: %v", i, err)
		}
	}
	e.checkMixed()
}

// TestQuietFlushBackfill (issue 30: the quiet flush judged age by record
// times only): a chain of old record times (a backfill: 10 days) settled
// by a warm settler is not quiet-flushed at the idle step right after
// its step, nor FlushAge - 1 ms of clock later, and is at FlushAge of
// clock without a new pass; a new pass moves the settled cursor and
// starts the wait again. A new settler (nothing known of the chain)
// flushes by record time, as before, so no chain waits on a settler's
// memory. Before, the idle step right after every step flushed every
// stream (a ref and an object per stream per settle interval).
func TestQuietFlushBackfill(t *testing.T) {
	const age = time.Hour
	e := newEnv(t, 3, nil)
	e.withIndex()
	e.s.FlushAge = age
	e.flights(4)
	e.absorbAll()
	clk := clock.NewManual(time.UnixMilli(e.ts + 10*24*time.Hour.Milliseconds()))
	e.s.Clock = clk
	if _, err := e.s.Run(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	settled := e.head()
	if settled.Flushed == settled.Settled || settled.Settled != settled.Checkpoint {
		t.Fatalf("head %+v: want everything in live runs", settled)
	}
	start := clk.Now()
	for _, wait := range []time.Duration{0, age - time.Millisecond} {
		clk.Set(start.Add(wait))
		if _, err := e.s.Step(t.Context(), chainX); err != nil {
			t.Fatal(err)
		}
		if h := e.head(); h != settled {
			t.Fatalf("idle %s after the step: head %+v, want it unchanged %+v", wait, h, settled)
		}
	}
	// A new pass: the wait starts again from its step.
	e.flights(1)
	e.absorbAll()
	clk.Set(start.Add(age - time.Millisecond))
	e.step()
	moved := e.head()
	clk.Set(start.Add(age))
	if _, err := e.s.Step(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if h := e.head(); h != moved {
		t.Fatalf("FlushAge after the first step, just after the second: head %+v, want %+v", h, moved)
	}
	clk.Set(start.Add(2*age - time.Millisecond))
	if _, err := e.s.Step(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if h := e.head(); h.Flushed != h.Settled || h.Settled != moved.Settled {
		t.Fatalf("FlushAge after the last step: head %+v, want flushed at settled %s", h, moved.Settled)
	}
	e.check()
	// A new settler flushes a backfill by record time at once.
	e.flights(1)
	e.absorbAll()
	e.step()
	cold := &settle.Settler{Meta: e.s.Meta, Sets: e.s.Sets, Settled: e.settled, PassIndex: true, FlushAge: age, Clock: clk}
	if _, err := cold.Step(t.Context(), chainX); err != nil {
		t.Fatal(err)
	}
	if h := e.head(); h.Flushed != h.Settled {
		t.Fatalf("a new settler: head %+v, want flushed at settled", h)
	}
	e.check()
}
