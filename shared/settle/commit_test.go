package settle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
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

// crashCommit fails a step's commit (MoveCursors) while armed: a copy
// that wrote its run, flushes and merge and died before its one head
// write; every head write that lands is recorded.
type crashCommit struct {
	metastore.Store
	armed atomic.Bool
	heads []metastore.Head
}

func (m *crashCommit) MoveCursors(ctx context.Context, c metastore.ChainID, moves []metastore.CursorMove) error {
	if m.armed.Load() {
		return fmt.Errorf("crash before the commit: %w", absorbtest.ErrFault)
	}
	if err := m.Store.MoveCursors(ctx, c, moves); err != nil {
		return err
	}
	h, err := m.Store.GetHead(ctx, c)
	m.heads = append(m.heads, h)
	return err
}

// TestSettleHeadsAreWholeSteps (issue 30, finding 3, and "no
// intermediate heads"): a chain settled by copies that crash at their
// commit (after their runs, flushes and merges), by cold copies and by
// copies racing, stores only heads that the same chain settled step by
// step without a crash stores (settled, flushed and merged move in one
// write: no head is half a step, so there is none to finish), and ends
// with the same settled bucket. Before, a crash between the cursor
// writes left heads no crash-free run has (flushed or merged behind),
// which finishHead had to finish before any copy planned.
func TestSettleHeadsAreWholeSteps(t *testing.T) {
	config := func(s *settle.Settler) {
		s.PassIndex, s.MaxSlotsPerStep, s.Fanout, s.FlushAge = true, 1, 2, 25*time.Millisecond
	}
	var cc *crashCommit
	crashing := newEnv(t, 3, func(s metastore.Store) metastore.Store { cc = &crashCommit{Store: s}; return cc })
	twin := newEnv(t, 3, nil)
	for _, e := range []*env{crashing, twin} {
		e.withIndex()
		e.a.MaxSlotsPerPass = 1
		config(e.s)
		for f := range 8 {
			e.flightsWith(1, []int{1, f % 2, f % 3})
		}
		e.absorbAll()
	}
	b := twin.recordBytes()
	twin.s.FlushBytes, crashing.s.FlushBytes = 3*b, 3*b
	want := map[metastore.Head]bool{twin.head(): true}
	for twin.head().Settled != twin.head().Checkpoint {
		twin.step()
		want[twin.head()] = true
	}
	if h := twin.head(); h.Merged.IsZero() || h.Flushed == (metastore.Cursor{Epoch: 1}) {
		t.Fatalf("crash-free head %+v: want merges and flushes", h)
	}
	ctx := t.Context()
	rng, crashes := 0, 0
	for step := 0; crashing.head().Settled != crashing.head().Checkpoint; step++ {
		if step > 40 {
			t.Fatalf("not settled in %d steps: %+v", step, crashing.head())
		}
		rng = (rng*7 + 3) % 10
		s := &settle.Settler{Meta: cc, Sets: crashing.s.Sets, Settled: crashing.settled, FlushBytes: 3 * b}
		config(s)
		switch {
		case rng < 4: // a crash at the commit
			cc.armed.Store(true)
			if _, err := s.Step(ctx, chainX); !errors.Is(err, absorbtest.ErrFault) {
				t.Fatalf("step %d: a crash at the commit: %v", step, err)
			}
			cc.armed.Store(false)
			crashes++
		case rng < 6: // two copies racing
			errs := make(chan error, 2)
			for range 2 {
				go func() { _, err := s.Step(context.Background(), chainX); errs <- err }()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatalf("step %d: racing copies: %v", step, err)
				}
			}
		default:
			if _, err := s.Step(ctx, chainX); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		crashing.checkMixed()
	}
	if len(cc.heads) == 0 || crashes == 0 {
		t.Fatalf("%d heads written, %d crashes", len(cc.heads), crashes)
	}
	for i, h := range cc.heads {
		if !want[h] {
			t.Errorf("head %d %+v: no crash-free step makes it", i, h)
		}
	}
	got, wantKeys := crashing.listed(""), twin.listed("")
	if !slices.Equal(got, wantKeys) {
		t.Fatalf("settled bucket:\n got  %v\n want %v", got, wantKeys)
	}
	for _, k := range got {
		x, _ := crashing.settled.Get(ctx, k, 0, -1)
		y, _ := twin.settled.Get(ctx, k, 0, -1)
		if !bytes.Equal(x, y) {
			t.Errorf("%s: other bytes than the crash-free run's", k)
		}
	}
}

// TestSettlePlanDigestCoversFlushSettings: a plan's digest covers the
// settings that decide where its flushes' refs end (MergeBelowBytes,
// MaxObjectSpan), not only its packs' layout: a copy that dies before
// its run and a copy after a deploy that changed one of them write
// their packs under two digests, and the run stored names the live
// plan's. Before, both plans had one digest (the settings were "frozen
// for a chain" and nothing said so in the run).
func TestSettlePlanDigestCoversFlushSettings(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dead, live func(s *settle.Settler)
	}{
		{"MergeBelowBytes", func(s *settle.Settler) { s.MergeBelowBytes = -1 }, func(s *settle.Settler) { s.MergeBelowBytes = 0 }},
		{"MaxObjectSpan", func(s *settle.Settler) { s.MaxObjectSpan = time.Minute }, func(s *settle.Settler) { s.MaxObjectSpan = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 4, nil)
			e.withIndex()
			e.s.MaxSlotsPerStep = 4
			e.flights(4)
			e.absorbAll()
			crash := &crashRunPut{Bucket: e.settled}
			crash.armed.Store(true)
			dead := e.copyOf(crash)
			tc.dead(dead)
			if _, err := dead.Step(t.Context(), chainX); !errors.Is(err, absorbtest.ErrFault) {
				t.Fatalf("the copy that dies: %v", err)
			}
			tc.live(e.s)
			e.step()
			digests := map[uint32]bool{}
			for _, k := range e.packKeys() {
				p, ok := format.ParsePackKey(k)
				if !ok {
					t.Fatalf("pack key %s", k)
				}
				digests[p.Digest] = true
			}
			run := e.run(cur(1, 0))
			if len(digests) != 2 || !digests[run.Digest] {
				t.Fatalf("pack digests %v, run's %d: want the dead plan's and the run's", digests, run.Digest)
			}
		})
	}
}
