package trim_test

import (
	"os"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/absorb/absorbtest"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/trim"
)

// TestQuietChainFinishes: issue 30's "a chain with no new passes never
// flushes its runs". Two streams write, settle moves their records into
// runs (not yet FlushAge old), then the chain goes quiet; one stream is
// deleted meanwhile. Three hours of wall time later, the settle and trim
// Lambdas' scheduled events (testdata/scheduled.json) come with no new
// passes: the runs are flushed (the flushed
// cursor reaches the settled one), the deletion finishes, and every
// record of the live stream reads from its refs. Before the settler took
// a clock (settle.Settler.Clock, ADR 0057), its flush decision took its
// time from the records of the step's passes only, a quiet chain had no
// step, and this failed (Waiting 1, flushed 1/0 of 1/3).
func TestQuietChainFinishes(t *testing.T) {
	const hour = int64(time.Hour / time.Millisecond)
	e := newEnv(t, 2, hour)
	e.a.Index, e.s.PassIndex, e.tr.PassIndex = e.settled, true, true
	e.s.Clock = e.clk
	e.flights(3)
	e.settleAll()
	if h := e.head(); h.Flushed == h.Settled {
		t.Fatalf("head %+v: flushed already; the reproduction needs live runs", h)
	}
	if err := e.mem.SetStreamState(t.Context(), e.names[1], e.ids[1].String(), metastore.StreamDeleting); err != nil {
		t.Fatal(err)
	}
	e.clk.Set(time.UnixMilli(e.ts + 3*hour))
	// The settle and trim Lambdas' scheduled events, with no new passes.
	raw, err := os.ReadFile("testdata/scheduled.json")
	if err != nil {
		t.Fatal(err)
	}
	sh := &settle.Handler{Settler: e.s, Chains: []metastore.ChainID{chainX}}
	th := &trim.Handler{Trimmer: e.tr, Chains: []metastore.ChainID{chainX}}
	for range 3 {
		if _, err := sh.Handle(t.Context(), raw); err != nil {
			t.Fatal(err)
		}
		if _, err := th.Handle(t.Context(), raw); err != nil {
			t.Fatal(err)
		}
	}
	r, err := e.tr.Streams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waiting := r.Waiting
	h := e.head()
	if h.Flushed != h.Settled || waiting != 0 || len(e.deleting()) != 0 {
		t.Fatalf("3 h after the chain went quiet: head flushed %s, settled %s; deletions waiting %d, deleting streams %d: want everything flushed and the deletion done",
			h.Flushed, h.Settled, waiting, len(e.deleting()))
	}
	// The live stream's records all read from refs (absorbtest.ReadStream
	// reads refs only), and no pack is left.
	got, err := absorbtest.ReadStream(t.Context(), e.mem, e.set, e.settled, e.ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := absorbtest.Equal(got, e.star.Written(e.ids[0])); err != nil {
		t.Fatalf("stream 0 after the quiet flush: %v", err)
	}
	packs, err := e.settled.List(t.Context(), "packs/")
	if err != nil {
		t.Fatal(err)
	}
	if len(packs) != 0 {
		t.Fatalf("packs left after the quiet flush and trim: %q", packs)
	}
}
