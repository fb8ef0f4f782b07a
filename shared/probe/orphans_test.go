package probe

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// absorbingChain is a metastore with standard chain star-0 in epoch 1 and
// an absorb pass to slot 10 begun, to put refs with.
func absorbingChain(t *testing.T) (metastore.Store, metastore.ChainID, metastore.Cursor) {
	t.Helper()
	meta := metastore.NewMem()
	c := metastore.ChainID{Star: "star-0", Class: metastore.Standard}
	mint(t, meta, c, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"std"}, Window: 4}, 0)
	pass := metastore.Cursor{Epoch: 1, Slot: 10}
	if _, err := meta.BeginAbsorb(context.Background(), c, metastore.Cursor{Epoch: 1}, pass); err != nil {
		t.Fatal(err)
	}
	return meta, c, pass
}

// TestOrphansDeletedAfterGrace: settled objects no ref points to are
// deleted by the sweep once provably unreferenced (no ref names them and
// no transit ref overlaps them) for the whole grace period, and only then
// (issue 13, finding 10: they were reported and never deleted).
func TestOrphansDeletedAfterGrace(t *testing.T) {
	ctx := context.Background()
	a, b := format.StreamID{0xa}, format.StreamID{0xb}
	meta, c, pass := absorbingChain(t)
	settled := objstore.NewMem("settled")
	ref := func(id format.StreamID, first, last uint64, settledKey string) metastore.Ref {
		l := metastore.Location{Settled: true, Key: settledKey, Length: 7}
		if settledKey == "" {
			l = metastore.Location{Key: format.SlotKey("star-0", 1, 3), Offset: 60, Length: 7}
		}
		return metastore.Ref{StreamID: id.String(), FirstSeq: first, LastSeq: last, Bytes: 7, Locations: []metastore.Location{l}}
	}
	kept := format.SettledKey(a, 0, 9)          // referenced
	merged := format.SettledKey(a, 10, 29)      // referenced
	leftover := format.SettledKey(a, 10, 19)    // a merge's superseded object, left by a crash: deletable
	inTransit := format.SettledKey(a, 30, 39)   // overlaps a transit ref: settle may be about to swap to it
	deletedStream := format.SettledKey(b, 0, 5) // its stream's refs are gone: deletable
	for _, k := range []string{kept, merged, leftover, inTransit, deletedStream} {
		put(t, settled, k, []byte("settled"))
	}
	refs := []metastore.Ref{ref(a, 0, 9, kept), ref(a, 10, 29, merged), ref(a, 30, 39, "")}
	if err := meta.PutRefs(ctx, c, pass, refs); err != nil {
		t.Fatal(err)
	}
	start := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewManual(start)
	h := &Handler{Meta: meta, Settled: settled, Clock: clk, OrphanGrace: time.Hour}
	sweep := func(want ...string) {
		t.Helper()
		rep, err := h.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.OrphansDeleted, want) {
			t.Fatalf("at +%v deleted %v, want %v (report %+v)", clk.Now().Sub(start), rep.OrphansDeleted, want, rep)
		}
		for _, k := range want {
			if has(settled, k) {
				t.Fatalf("%s still there", k)
			}
		}
	}
	sweep() // first seen: marked, nothing deleted
	if !has(settled, MarkPrefix+leftover) || !has(settled, MarkPrefix+deletedStream) || has(settled, MarkPrefix+inTransit) {
		t.Fatalf("markers: %v", settled.Keys())
	}
	clk.Sleep(time.Hour - time.Millisecond)
	sweep() // not yet
	// The deleted stream's object is adopted again (a ref points to it):
	// its marker goes, it is not deleted.
	adopt := ref(b, 0, 5, deletedStream)
	if err := meta.PutRefs(ctx, c, pass, []metastore.Ref{adopt}); err != nil {
		t.Fatal(err)
	}
	clk.Sleep(time.Millisecond)
	sweep(leftover)
	if has(settled, MarkPrefix+deletedStream) || has(settled, MarkPrefix+leftover) {
		t.Fatalf("markers left: %v", settled.Keys())
	}
	// Orphaned again: the grace starts over.
	if err := meta.DeleteRefs(ctx, []metastore.Ref{adopt}); err != nil {
		t.Fatal(err)
	}
	sweep()
	clk.Sleep(time.Hour - time.Millisecond)
	sweep()
	clk.Sleep(time.Millisecond)
	sweep(deletedStream)
	// Never deleted: the referenced ones and the one overlapping transit.
	clk.Sleep(100 * time.Hour)
	sweep()
	for _, k := range []string{kept, merged, inTransit} {
		if !has(settled, k) {
			t.Fatalf("%s deleted", k)
		}
	}
	// Report only: a negative grace deletes nothing. merged becomes an
	// orphan (its ref moves to another object) and stays.
	if err := meta.SwapRefs(ctx, []metastore.Ref{refs[1]}, ref(a, 10, 29, merged+"-rewritten")); err != nil {
		t.Fatal(err)
	}
	h.OrphanGrace = -1
	sweep()
	clk.Sleep(100 * time.Hour)
	rep, err := h.Sweep(ctx)
	if err != nil || !slices.Contains(rep.Orphans, merged) || len(rep.OrphansDeleted) != 0 || !has(settled, merged) {
		t.Fatalf("report-only sweep: %+v, %v", rep, err)
	}
}

// TestOrphansWarnOnce: an orphan is a warning when a sweep first finds it;
// the sweeps that follow while it waits out its grace log it at debug
// (issue 34: strand dev, which sweeps every 30 s, would have warned for a
// day). A new orphan is a warning again.
func TestOrphansWarnOnce(t *testing.T) {
	ctx := context.Background()
	a := format.StreamID{0xa}
	meta, c, pass := absorbingChain(t)
	settled := objstore.NewMem("settled")
	kept := format.SettledKey(a, 0, 9)
	put(t, settled, kept, []byte("settled"))
	put(t, settled, format.SettledKey(a, 0, 4), []byte("settled")) // a crash's leftover
	ref := metastore.Ref{StreamID: a.String(), FirstSeq: 0, LastSeq: 9, Bytes: 7, Locations: []metastore.Location{{Settled: true, Key: kept, Length: 7}}}
	if err := meta.PutRefs(ctx, c, pass, []metastore.Ref{ref}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	h := &Handler{Meta: meta, Settled: settled, Clock: clock.NewManual(time.UnixMilli(1_700_000_000_000)), OrphanGrace: time.Hour,
		Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	warned := func() bool {
		t.Helper()
		buf.Reset()
		if _, err := h.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(buf.String(), "settled objects no ref points to")
	}
	if !warned() {
		t.Fatal("the first sweep to find an orphan did not warn")
	}
	if warned() {
		t.Fatalf("a sweep that found only a known orphan warned: %q", buf.String())
	}
	put(t, settled, format.SettledKey(a, 5, 9), []byte("settled"))
	if !warned() {
		t.Fatal("a new orphan did not warn")
	}
}
