package probe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
)

// TestOrphansWithPassIndex: with the pass index (design 014) no ref is in
// transit; a settled object that overlaps a stream's part in a chain's
// window (settle may be about to write a ref to it) is kept as in transit,
// and becomes a deletable orphan once settle moved the window past it.
func TestOrphansWithPassIndex(t *testing.T) {
	for _, max := range []int64{0, 1} { // 1: a window cache smaller than a pass
		t.Run(fmt.Sprintf("window-cache=%d", max), func(t *testing.T) { testOrphansWithPassIndex(t, max) })
	}
}

func testOrphansWithPassIndex(t *testing.T, windowMax int64) {
	ctx := context.Background()
	meta := metastore.NewMem()
	c := metastore.ChainID{Star: "star-0", Class: metastore.Express}
	set := chain.Set{Star: c.Star, W: 1, Buckets: []objstore.Bucket{objstore.NewMem("x")}}
	star, err := absorbtest.NewStar(ctx, meta, c, set)
	if err != nil {
		t.Fatal(err)
	}
	id := absorbtest.StreamIDs(1)[0]
	if _, err := star.Flight(ctx, []format.StreamID{id}, []int{10}, 1_700_000_000_000, 20, 0); err != nil {
		t.Fatal(err)
	}
	settled := objstore.NewMem("settled")
	a := &absorb.Absorber{Meta: meta, Sets: absorb.Sets{Express: set}, Index: settled}
	if _, err := a.Run(ctx, c, star.Released()); err != nil {
		t.Fatal(err)
	}
	stray := format.SettledKey(id, 5, 9) // a settle copy's object, not yet referenced
	put(t, settled, stray, []byte("settled"))
	clk := clock.NewManual(time.UnixMilli(1_700_000_000_000))
	h := &Handler{Meta: meta, Settled: settled, Clock: clk, OrphanGrace: time.Hour, PassIndex: true,
		Sets: map[metastore.ChainID]chain.Set{c: set}, Window: &passindex.Window{Meta: meta, Bucket: settled, MaxBytes: windowMax}}
	rep, err := h.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Orphans, stray) || has(settled, MarkPrefix+stray) {
		t.Fatalf("in the window: orphans %v, marked %v", rep.Orphans, has(settled, MarkPrefix+stray))
	}
	// A probe with the switch off refuses the indexed chain (its orphan
	// report would miss the window), naming the fix.
	off := &Handler{Meta: meta, Settled: settled, Clock: clk, OrphanGrace: time.Hour, Sets: map[metastore.ChainID]chain.Set{c: set}}
	if _, err := off.Sweep(ctx); !errors.Is(err, absorb.ErrIndexed) {
		t.Fatalf("a sweep with the pass index off on an indexed chain: %v, want ErrIndexed", err)
	}
	// Without the switch the probe sees no transit ref at all, and would
	// start the grace on it: the switch is what keeps it.
	if found, _, err := findOrphans(ctx, []string{stray}, meta.QueryRefs); err != nil || len(found) != 1 || !found[0].Deletable {
		t.Fatalf("refs only: %+v, %v", found, err)
	}
	// Settled into a run (packed, not flushed): a flush may still write an
	// object for these seqs, so the stray is still kept. Regression: the
	// run's pack locations counted as settled, and the probe started the
	// grace on objects a flush was about to reference.
	s := &settle.Settler{Meta: meta, Sets: absorb.Sets{Express: set}, Settled: settled, PassIndex: true}
	if _, err := s.Run(ctx, c); err != nil {
		t.Fatal(err)
	}
	if rep, err = h.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Orphans, stray) || has(settled, MarkPrefix+stray) {
		t.Fatalf("in a run: orphans %v, marked %v", rep.Orphans, has(settled, MarkPrefix+stray))
	}
	// Flushed (a later step finds the run old): the window no longer holds
	// the stream's seqs, the stray is a deletable orphan.
	if _, err := star.Flight(ctx, []format.StreamID{id}, []int{1}, 1_700_000_000_100, 20, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, c, star.Released()); err != nil {
		t.Fatal(err)
	}
	s.FlushAge = time.Nanosecond
	if _, err := s.Run(ctx, c); err != nil {
		t.Fatal(err)
	}
	if rep, err = h.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Orphans, stray) || !has(settled, MarkPrefix+stray) || slices.Contains(rep.Orphans, format.SettledKey(id, 0, 10)) {
		t.Fatalf("after the flush: orphans %v, marked %v", rep.Orphans, has(settled, MarkPrefix+stray))
	}
}
