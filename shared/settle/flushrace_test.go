package settle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/settle"
)

// meetAtSettleRef holds a copy's first SettleRef until the other copy
// has reached its own, and its commit until the other has reached its
// commit (or a second has passed): both copies read the stream's refs and
// decide their flush before either writes, and both write before either
// commits (a commit would fail the other's SettleRef on the cursor).
type meetAtSettleRef struct {
	metastore.Store
	ref, commit meeting
}

// meeting is one copy's side of a meeting point: here is closed when the
// copy arrives, others when the other copy does.
type meeting struct {
	once         sync.Once
	here, others chan struct{}
}

func (m *meeting) meet() {
	m.once.Do(func() {
		close(m.here)
		select {
		case <-m.others:
		case <-time.After(time.Second):
		}
	})
}

func (m *meetAtSettleRef) SettleRef(ctx context.Context, c metastore.ChainID, settled metastore.Cursor, old []metastore.Ref, repl metastore.Ref) error {
	m.ref.meet()
	return m.Store.SettleRef(ctx, c, settled, old, repl)
}

func (m *meetAtSettleRef) MoveCursors(ctx context.Context, c metastore.ChainID, moves []metastore.CursorMove) error {
	m.commit.meet()
	return m.Store.MoveCursors(ctx, c, moves)
}

// checkRefsApart: every stream's refs hold adjacent seq ranges, none
// overlapping another (metastore.SettleApart).
func (e *env) checkRefsApart() {
	e.t.Helper()
	for i := range e.ids {
		refs := e.refs(i)
		for j := 1; j < len(refs); j++ {
			if refs[j].FirstSeq != refs[j-1].LastSeq+1 {
				e.t.Fatalf("stream %d: refs %d-%d and %d-%d overlap or leave a gap", i, refs[j-1].FirstSeq, refs[j-1].LastSeq, refs[j].FirstSeq, refs[j].LastSeq)
			}
		}
	}
}

// TestSettleFlushRacingCopiesOtherMergeSettings (issue 30, design 014
// "Level 1 as built"): two copies of one step, one that
// merges a stream's small previous settled object into its flush and one
// that does not (another MergeBelowBytes or MaxObjectSpan: a rolling
// deploy of a build that changes a default), flush the same stream at the
// same moment. The stream's refs never overlap and read back every record
// once. Before SettleRef conditioned on the neighbouring refs, both refs
// landed (the merged one at the previous ref's key, the other at the
// flush's first seq): refs of seqs 0-7 and 4-7 (failed on 8be6a94, both
// cases).
func TestSettleFlushRacingCopiesOtherMergeSettings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other func(s *settle.Settler)
	}{
		{"MergeBelowBytes", func(s *settle.Settler) { s.MergeBelowBytes = -1 }},
		{"MaxObjectSpan", func(s *settle.Settler) { s.MaxObjectSpan = time.Nanosecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, nil) // one record a flight
			e.withIndex()
			e.s.MaxSlotsPerStep = 4
			e.flights(8)
			e.absorbAll()
			e.s.FlushBytes = e.recordBytes() // every step flushes the stream
			e.step()                         // its first ref: seqs 0-3, small
			if refs := e.refs(0); len(refs) != 1 || refs[0].LastSeq != 3 {
				t.Fatalf("refs after the first step %+v: want one of seqs 0-3", refs)
			}
			r0, r1, c0, c1 := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
			copies := []*settle.Settler{e.copyOf(e.settled), e.copyOf(e.settled)}
			copies[0].Meta = &meetAtSettleRef{Store: e.mem, ref: meeting{here: r0, others: r1}, commit: meeting{here: c0, others: c1}}
			copies[1].Meta = &meetAtSettleRef{Store: e.mem, ref: meeting{here: r1, others: r0}, commit: meeting{here: c1, others: c0}}
			tc.other(copies[1])
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, s := range copies {
				wg.Go(func() { _, errs[i] = s.Step(t.Context(), chainX) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("copy %d: %v", i, err)
				}
			}
			e.checkRefsApart()
			if refs := e.refs(0); len(refs) == 0 || refs[0].FirstSeq != 0 || refs[len(refs)-1].LastSeq != 7 {
				t.Fatalf("refs %+v: want seqs 0-7", refs)
			}
			if h := e.head(); h.Settled != cur(1, 8) || h.Flushed != cur(1, 8) {
				t.Fatalf("head %+v: want settled and flushed at 1/8", h)
			}
			e.check()
		})
	}
}
