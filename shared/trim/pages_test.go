package trim_test

import (
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
