package passindex_test

import (
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/star"
)

// TestWindowRecoverReadsRefsInPages (ADR 0075): a stream whose last part
// is in the window (a merged run, seqs 400-459) and whose 40 refs of ten
// seqs before it each hold one producer's batch opens (star.RecoverStream
// on Window.ForStream) with three metastore reads: the head for LastRef,
// and the head and one page of refs (RefsBefore) for the 15 refs before
// it (RecoverRefs), where it was a QueryRefs a ref. The recovered
// producers are those of the part and of exactly those 15 refs.
// RefsBefore's page: newest first, the window's parts with the refs, no
// part older than the page's oldest ref.
func TestWindowRecoverReadsRefsInPages(t *testing.T) {
	ctx := t.Context()
	mem := metastore.NewMem()
	if err := mem.MintEpoch(ctx, chainX, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
		t.Fatal(err)
	}
	bucket := objstore.NewMem("settled")
	id := format.StreamID{0x77, 1}
	prod := func(k int) format.ProducerID { return format.ProducerID{0x50, byte(k)} }
	run := format.PassIndex{Epoch: 1, FirstSlot: 0, EndSlot: 60, Streams: []format.PassStream{{Stream: id, FirstSeq: 400, LastSeq: 459, FirstTsMs: 1, LastTsMs: 2, Bytes: 6000,
		Segments: []format.PassSegment{{Slot: 0, FirstSeq: 400, Count: 60, Length: 6036}},
		Marks:    []format.PassMark{{Producer: prod(40), BatchSeq: 0, FirstSeq: 400, LastSeq: 459}}}}}
	obj, err := format.AppendPassIndex(nil, run)
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.PutIfAbsent(ctx, format.MergedRunKey(chainX.Star, chainX.Class.String(), 1, 0), obj); err != nil {
		t.Fatal(err)
	}
	// The head whose window is the run: indexed from 0, checkpoint,
	// settled and merged at 60, flushed at 0.
	h0, err := mem.GetHead(ctx, chainX)
	if err != nil {
		t.Fatal(err)
	}
	end := metastore.Cursor{Epoch: 1, Slot: 60}
	for _, a := range []struct {
		k        metastore.CursorKind
		from, to metastore.Cursor
	}{{metastore.Indexed, h0.Indexed, h0.Checkpoint}, {metastore.Checkpoint, h0.Checkpoint, end}, {metastore.Settled, h0.Settled, end}, {metastore.Merged, h0.Merged, end}} {
		if err := mem.AdvanceCursor(ctx, chainX, a.k, a.from, a.to); err != nil {
			t.Fatal(err)
		}
	}
	// The refs, put by a pass of a chain of their own.
	ch := metastore.ChainID{Star: "star-r", Class: metastore.Standard}
	if err := mem.MintEpoch(ctx, ch, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"b"}, Window: 1}); err != nil {
		t.Fatal(err)
	}
	hr, err := mem.BeginAbsorb(ctx, ch, metastore.Cursor{Epoch: 1}, metastore.Cursor{Epoch: 1, Slot: 100})
	if err != nil {
		t.Fatal(err)
	}
	var refs []metastore.Ref
	for k := range 40 {
		first := uint64(10 * k)
		refs = append(refs, metastore.Ref{StreamID: id.String(), FirstSeq: first, LastSeq: first + 9, LastTsMs: 1,
			Locations: []metastore.Location{{Key: "streams/x", Length: 1}},
			Producers: []metastore.ProducerMark{{Producer: prod(k), BatchSeq: 0, FirstSeq: first, LastSeq: first + 9}}})
	}
	if err := mem.PutRefs(ctx, ch, hr.Absorbing, refs); err != nil {
		t.Fatal(err)
	}
	st := metastore.Stream{ID: id.String(), Class: metastore.Express, Star: chainX.Star}

	count := metacount.New(mem)
	w := &passindex.Window{Meta: count, Bucket: bucket}
	info, err := star.RecoverStream(ctx, w.ForStream(st), id, metastore.Express, time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	got := count.Snapshot()
	if info.Next != 460 || got.Total() > 3 || got.Of(metacount.QueryRefs) != 0 {
		t.Fatalf("open: tail %d, %d metastore calls (%d GetHead, %d RefsBefore, %d QueryRefs, %d LastRef); want 460 and at most 3",
			info.Next, got.Total(), got.Of(metacount.GetHead), got.Of(metacount.RefsBefore), got.Of(metacount.QueryRefs), got.Of(metacount.LastRef))
	}
	want := map[format.ProducerID]bool{prod(40): true}
	for k := 40 - star.RecoverRefs + 1; k < 40; k++ {
		want[prod(k)] = true
	}
	if len(info.Producers) != len(want) {
		t.Fatalf("recovered %d producers, want %d (the part's and the last %d refs')", len(info.Producers), len(want), star.RecoverRefs-1)
	}
	for _, p := range info.Producers {
		if !want[p.ID] {
			t.Fatalf("recovered producer %x, not among the last %d parts", p.ID[:2], star.RecoverRefs)
		}
	}

	// The page itself: the part first, then refs, newest first.
	page, err := w.RefsBefore(ctx, st, ^uint64(0), 3)
	if err != nil || len(page) != 3 || page[0].FirstSeq != 400 || page[1].FirstSeq != 390 || page[2].FirstSeq != 380 {
		t.Fatalf("RefsBefore(end, 3): %v, %v; want the part at 400, refs at 390 and 380", firsts(page), err)
	}
	page, err = w.RefsBefore(ctx, st, 400, 2)
	if err != nil || len(page) != 2 || page[0].FirstSeq != 390 || page[1].FirstSeq != 380 {
		t.Fatalf("RefsBefore(400, 2): %v, %v; want refs at 390 and 380", firsts(page), err)
	}
	if _, err := w.RefsBefore(ctx, st, 400, 0); err == nil {
		t.Fatal("RefsBefore with limit 0: no error")
	}
}

func firsts(refs []metastore.Ref) []uint64 {
	var out []uint64
	for _, r := range refs {
		out = append(out, r.FirstSeq)
	}
	return out
}
