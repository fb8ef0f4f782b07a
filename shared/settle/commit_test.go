package settle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
)

// Tests of a settle step's commit point (design 014, "One commit point
// per step"; issue 30): what a step writes before its run index is named
// by the plan's decision digest, so a copy that died before its run index
// leaves garbage that no later plan collides with, whatever its settle
// configuration.

// crashRunPut fails every PutIfAbsent of a level-1 run index while armed:
// a copy that dies between its packs and its run index.
type crashRunPut struct {
	objstore.Bucket
	armed atomic.Bool
}

func (b *crashRunPut) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	if b.armed.Load() && strings.Contains(key, "/runs/") {
		return fmt.Errorf("crash before the run index %s: %w", key, absorbtest.ErrFault)
	}
	return b.Bucket.PutIfAbsent(ctx, key, body)
}

// copyOf is another copy of e's settler (its configuration) on bucket b.
func (e *env) copyOf(b objstore.Bucket) *settle.Settler {
	return &settle.Settler{Meta: e.s.Meta, Sets: absorb.Sets{Express: e.set}, Settled: b, PassIndex: true,
		MaxSlotsPerStep: e.s.MaxSlotsPerStep, FlushBytes: e.s.FlushBytes, FlushAge: e.s.FlushAge,
		PackBufferBytes: e.s.PackBufferBytes, MaxObjectBytes: e.s.MaxObjectBytes, Fanout: e.s.Fanout}
}

// TestSettleConfigChangeAfterCrashBeforeRun (issue 30, finding 2): a copy
// writes its packs and dies before its run index; a deploy changes the
// settle configuration (the flush rule, or the pack order); the copies
// after it plan otherwise. They settle the step, and every record reads
// back. Before pack keys carried the plan's digest, the new plan's first
// pack collided with the dead plan's at the same key: ErrForeign on every
// step, forever (failed on main 3b5e022: both cases).
func TestSettleConfigChangeAfterCrashBeforeRun(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dead, live func(s *settle.Settler, recordBytes int64)
	}{
		{"FlushBytes", func(s *settle.Settler, b int64) { s.FlushBytes = 1 << 30 }, func(s *settle.Settler, b int64) { s.FlushBytes = 8 * b }},
		{"PackBufferBytes", func(s *settle.Settler, b int64) { s.PackBufferBytes = -1 }, func(s *settle.Settler, b int64) { s.PackBufferBytes = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 4, nil)
			e.withIndex()
			e.s.MaxSlotsPerStep = 4
			e.flights(8)
			e.absorbAll()
			b := e.recordBytes()
			crash := &crashRunPut{Bucket: e.settled}
			crash.armed.Store(true)
			dead := e.copyOf(crash)
			tc.dead(dead, b)
			if _, err := dead.Step(t.Context(), chainX); !errors.Is(err, absorbtest.ErrFault) {
				t.Fatalf("the copy that dies: %v", err)
			}
			if len(e.packKeys()) == 0 || len(e.runKeys()) != 0 {
				t.Fatalf("packs %v, runs %v: want the dead copy's packs and no run", e.packKeys(), e.runKeys())
			}
			// The deploy: the copies after it have the other configuration.
			tc.live(e.s, b)
			for range 2 {
				if _, err := e.s.Step(t.Context(), chainX); err != nil {
					t.Fatalf("a copy after the deploy: %v", err)
				}
				e.checkMixed()
			}
			if h := e.head(); h.Settled != cur(1, 8) {
				t.Fatalf("head %+v: want settled 1/8", h)
			}
		})
	}
}

// hookAdvance runs after, once, right after an AdvanceCursor of kind
// lands, and fails every AdvanceCursor of kind fail (when not 0): a crash
// of the step before that cursor moves.
type hookAdvance struct {
	metastore.Store
	after metastore.CursorKind
	hook  func()
	fail  metastore.CursorKind
}

func (h *hookAdvance) AdvanceCursor(ctx context.Context, c metastore.ChainID, k metastore.CursorKind, from, to metastore.Cursor) error {
	if h.fail != 0 && k == h.fail {
		return fmt.Errorf("crash before the %s cursor moves: %w", k, absorbtest.ErrFault)
	}
	err := h.Store.AdvanceCursor(ctx, c, k, from, to)
	if k == h.after && h.hook != nil {
		hook := h.hook
		h.hook = nil
		hook()
	}
	return err
}

// TestSettleRetryFinishesTheHead (issue 30, finding 3): copy B finishes a
// head (the merge a crashed copy left pending); right then copy A
// settles two steps and crashes before its own merge's cursor moves; B
// then plans on that head, which is unfinished again, and dies between
// its packs and its run index; C, after them, settles. B's plan must be
// the one every copy makes on the finished head (its packs the ones C's
// run names: no other plan's packs), and C settles and every record
// reads back. Before, Step's retry planned without finishing the head:
// B flushed by age a stream whose oldest entry C sees in a merged run
// (its time the group's latest), its packs at C's pack keys held other
// bytes, and C failed with ErrForeign, as every copy after it would
// (failed on main 3b5e022).
func TestSettleRetryFinishesTheHead(t *testing.T) {
	e := newEnv(t, 2, nil)
	e.withIndex()
	e.a.MaxSlotsPerPass = 1
	// Five flights, one slot, one pass and one run each: stream 0 in
	// every one, stream 1 in the third and the fifth.
	for f := range 5 {
		counts := []int{1, 0}
		if f == 2 || f == 4 {
			counts[1] = 1
		}
		e.flightsWith(1, counts)
	}
	e.absorbAll()
	config := func(s *settle.Settler) {
		s.MaxSlotsPerStep, s.Fanout, s.FlushBytes, s.FlushAge = 1, 2, 1<<30, 15*time.Millisecond
	}
	copyOn := func(meta metastore.Store, b objstore.Bucket) *settle.Settler {
		s := &settle.Settler{Meta: meta, Sets: absorb.Sets{Express: e.set}, Settled: b, PassIndex: true}
		config(s)
		return s
	}
	ctx := t.Context()
	// X settles runs 1 and 2 and crashes before its merge's cursor moves.
	x := copyOn(&hookAdvance{Store: e.mem}, e.settled)
	if _, err := x.Step(ctx, chainX); err != nil {
		t.Fatal(err)
	}
	x.Meta = &hookAdvance{Store: e.mem, fail: metastore.Merged}
	if _, err := x.Step(ctx, chainX); !errors.Is(err, absorbtest.ErrFault) {
		t.Fatalf("X's second step: %v", err)
	}
	// A: runs 3 and 4, the second's merge crashing at its cursor.
	a := copyOn(&hookAdvance{Store: e.mem, fail: metastore.Merged}, e.settled)
	var aErr [2]error
	crash := &crashRunPut{Bucket: e.settled}
	crash.armed.Store(true)
	b := copyOn(&hookAdvance{Store: e.mem, after: metastore.Merged, hook: func() {
		_, aErr[0] = a.Step(ctx, chainX)
		_, aErr[1] = a.Step(ctx, chainX)
	}}, crash)
	if _, err := b.Step(ctx, chainX); !errors.Is(err, absorbtest.ErrFault) {
		t.Fatalf("B's step: %v", err)
	}
	if aErr[0] != nil || !errors.Is(aErr[1], absorbtest.ErrFault) {
		t.Fatalf("A's steps: %v, %v", aErr[0], aErr[1])
	}
	if h := e.head(); h.Settled != cur(1, 4) {
		t.Fatalf("head %+v after A: want settled 1/4", h)
	}
	c := copyOn(e.mem, e.settled)
	for range 2 {
		if _, err := c.Step(ctx, chainX); err != nil {
			t.Fatalf("C's step: %v", err)
		}
	}
	if h := e.head(); h.Settled != cur(1, 5) {
		t.Fatalf("head %+v: want settled 1/5", h)
	}
	e.checkMixed()
	// B's packs are those of the run C adopted or made: no other plan's.
	run := e.run(cur(1, 4))
	want := map[string]bool{}
	for i := range run.Streams {
		for _, l := range passindex.RunRef(chainX, run, &run.Streams[i]).Locations {
			want[l.Key] = true
		}
	}
	for _, k := range e.listed(format.PackPrefix(chainX.Star, "express", 1, 4)) {
		if !want[k] {
			t.Errorf("pack %s: no run names it (a plan on an unfinished head)", k)
		}
	}
}
