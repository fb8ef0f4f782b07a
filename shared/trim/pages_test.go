package trim_test

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metastoretest"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/trim"
)

// TestRetentionPastOnePage: retention drops every expired settled ref but
// the stream's last in one run, past QueryRefs pages cut short at
// DynamoDB's 1 MB. It took a page shorter than its limit for the end of
// the refs, so one run dropped one page's worth and left the rest.
func TestRetentionPastOnePage(t *testing.T) {
	ctx := t.Context()
	id := format.StreamID{0xa}
	meta := metastore.NewMem()
	const now = 1_700_000_000_000
	st := metastore.Stream{Name: "kept-a-while", ID: id.String(), Class: metastore.Standard, Star: "star-0",
		CreatedMs: now - 10_000, RetentionMs: 1000, State: metastore.StreamActive}
	if _, err := meta.CreateStream(ctx, st); err != nil {
		t.Fatal(err)
	}
	settled := objstore.NewMem("settled")
	refs := metastoretest.PaddedRefs(id.String(), 40, func(i uint64) metastore.Location {
		k := format.SettledKey(id, 10*i, 10*i+9)
		if err := settled.PutIfAbsent(ctx, k, []byte("settled")); err != nil {
			t.Fatal(err)
		}
		return metastore.Location{Settled: true, Key: k}
	})
	for i := range refs {
		refs[i].FirstTsMs, refs[i].LastTsMs = now-5000, now-5000
	}
	if err := metastoretest.PutPaged(ctx, meta, metastore.ChainID{Star: "star-0", Class: metastore.Standard}, refs); err != nil {
		t.Fatal(err)
	}
	if page, err := meta.QueryRefs(ctx, id.String(), 0, 101); err != nil || len(page) >= len(refs) {
		t.Fatalf("the first page holds %d of %d refs (%v), want a short page", len(page), len(refs), err)
	}
	tr := &trim.Trimmer{Meta: meta, Settled: settled, Clock: clock.NewManual(time.UnixMilli(now))}
	res, err := tr.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left, err := meta.QueryRefs(ctx, id.String(), 0, 101)
	if err != nil {
		t.Fatal(err)
	}
	if res.RefsDropped != 39 || len(left) != 1 || left[0].FirstSeq != 390 {
		t.Fatalf("one run dropped %d refs, left %d; want 39 dropped and the last (390) kept", res.RefsDropped, len(left))
	}
	if s, err := meta.GetStream(ctx, st.Name); err != nil || s.Floor != 390 {
		t.Fatalf("floor %d (%v), want 390", s.Floor, err)
	}
}

// onePage cuts every QueryRefs page to its first ref: the metastore
// contract lets a page end before its limit while more refs follow
// (tests/sim's MetaFaults.SetShortPages does this at random).
type onePage struct{ metastore.Store }

func (o onePage) QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	page, err := o.Store.QueryRefs(ctx, streamID, fromSeq, limit)
	return page[:min(len(page), 1)], err
}

// TestRetentionPastPagesOfOne: retention drops every expired settled ref
// but the stream's last in one run though every page holds one ref. It
// took a page of one for the stream's last ref and stopped there,
// dropping nothing (found by TestSimCommands' trim check, seed 11).
func TestRetentionPastPagesOfOne(t *testing.T) {
	const now = 1_700_000_000_000
	meta, tr, id := refsOfTen(t, now, 1000, [4]int64{now - 5000, now - 5000, now - 5000, now - 5000}, 0)
	tr.Meta = onePage{meta}
	res, left := streamsThenRefs(t, tr, meta, id.String())
	if res.RefsDropped != 3 || len(left) != 1 || left[0].FirstSeq != 30 {
		t.Fatalf("one run dropped %d refs, left %d; want 3 dropped and the last (30) kept", res.RefsDropped, len(left))
	}
}

// streamsThenRefs runs tr.Streams, then reads stream id's refs from
// meta.
func streamsThenRefs(t *testing.T, tr *trim.Trimmer, meta metastore.Store, id string) (trim.StreamResult, []metastore.Ref) {
	t.Helper()
	res, err := tr.Streams(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	left, err := meta.QueryRefs(t.Context(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return res, left
}

// refsOfTen makes a stream (retention retentionMs) of four settled refs,
// 0-9, 10-19, 20-29 and 30-39, whose records have timestamps lastTs[i],
// the last with trim point trimSeq (0: none), and the trimmer at now.
func refsOfTen(t *testing.T, now, retentionMs int64, lastTs [4]int64, trimSeq uint64) (*metastore.Mem, *trim.Trimmer, format.StreamID) {
	t.Helper()
	ctx := t.Context()
	id := format.StreamID{0xc}
	meta := metastore.NewMem()
	st := metastore.Stream{Name: "tens", ID: id.String(), Class: metastore.Standard, Star: "star-0",
		CreatedMs: now - 10_000, RetentionMs: retentionMs, State: metastore.StreamActive}
	if _, err := meta.CreateStream(ctx, st); err != nil {
		t.Fatal(err)
	}
	settled := objstore.NewMem("settled")
	var refs []metastore.Ref
	for i := range uint64(4) {
		k := format.SettledKey(id, 10*i, 10*i+9)
		if err := settled.PutIfAbsent(ctx, k, []byte("settled")); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, metastore.Ref{StreamID: id.String(), FirstSeq: 10 * i, LastSeq: 10*i + 9, FirstTsMs: lastTs[i], LastTsMs: lastTs[i],
			Bytes: 10, Locations: []metastore.Location{{Settled: true, Key: k, Length: 10, FirstSeq: 10 * i}}})
	}
	if trimSeq > 0 {
		refs[3].Commands = &format.StreamCommands{TrimSeq: trimSeq}
	}
	if err := metastoretest.PutPaged(ctx, meta, metastore.ChainID{Star: "star-0", Class: metastore.Standard}, refs); err != nil {
		t.Fatal(err)
	}
	return meta, &trim.Trimmer{Meta: meta, Settled: settled, Clock: clock.NewManual(time.UnixMilli(now))}, id
}

// TestRetainBoundaries pins retention's and the trim point's comparisons
// at the exact boundary on both sides: a ref whose last record is one
// millisecond before now - retention goes, one exactly at it stays; a ref
// ending one below the trim point goes, one ending at it stays. Refs 0-9,
// 10-19, 20-29 and the last, 30-39 (always kept).
func TestRetainBoundaries(t *testing.T) {
	const now = 1_700_000_000_000
	for _, tc := range []struct {
		name      string
		retention int64
		trimSeq   uint64
		lastTs    [3]int64 // of refs 0-2
		want      int      // refs dropped
	}{
		{"cutoff-1", 1000, 0, [3]int64{now - 1002, now - 1001, now - 1001}, 3},
		{"cutoff", 1000, 0, [3]int64{now - 1002, now - 1001, now - 1000}, 2},
		{"cutoff-first", 1000, 0, [3]int64{now - 1000, now - 1000, now - 1000}, 0},
		{"trim-below", 0, 30, [3]int64{now, now, now}, 3}, // ref 20-29 ends at 29 < 30
		{"trim-at", 0, 29, [3]int64{now, now, now}, 2},    // ref 20-29 ends at the trim point
		{"trim-first", 0, 9, [3]int64{now, now, now}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta, tr, id := refsOfTen(t, now, tc.retention, [4]int64{tc.lastTs[0], tc.lastTs[1], tc.lastTs[2], now}, tc.trimSeq)
			res, left := streamsThenRefs(t, tr, meta, id.String())
			if res.RefsDropped != tc.want || len(left) != 4-tc.want || left[0].FirstSeq != 10*uint64(tc.want) {
				t.Fatalf("dropped %d refs, %d left; want %d dropped", res.RefsDropped, len(left), tc.want)
			}
		})
	}
}
