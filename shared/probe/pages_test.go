package probe

import (
	"context"
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metastoretest"
)

// TestOrphansPastOnePage: the orphan scan reads every ref of a stream,
// past QueryRefs pages cut short at DynamoDB's 1 MB; an object named by a
// ref on a later page is not an orphan. The scan took a page shorter than
// its limit for the end of the refs, and so reported (and, after the
// grace, deleted) settled objects that refs still point to.
func TestOrphansPastOnePage(t *testing.T) {
	ctx := context.Background()
	id := format.StreamID{0xa}
	meta := metastore.NewMem()
	c := metastore.ChainID{Star: "star-0", Class: metastore.Standard}
	mint(t, meta, c, 0, metastore.Epoch{Epoch: 1, State: metastore.EpochActive, K: 1, W: 1, Buckets: []string{"std"}, Window: 4}, 0)
	pass := metastore.Cursor{Epoch: 1, Slot: 10}
	if _, err := meta.BeginAbsorb(ctx, c, metastore.Cursor{Epoch: 1}, pass); err != nil {
		t.Fatal(err)
	}
	var refs []metastore.Ref
	var keys []string
	for i := range uint64(40) {
		k := format.SettledKey(id, 10*i, 10*i+9)
		keys = append(keys, k)
		refs = append(refs, metastoretest.Padded(metastore.Ref{StreamID: id.String(), FirstSeq: 10 * i, LastSeq: 10*i + 9, Bytes: 7,
			Locations: []metastore.Location{{Settled: true, Key: k, Length: 7, FirstSeq: 10 * i}}}))
	}
	if err := meta.PutRefs(ctx, c, pass, refs); err != nil {
		t.Fatal(err)
	}
	if page, err := meta.QueryRefs(ctx, id.String(), 0, 500); err != nil || len(page) >= len(refs) {
		t.Fatalf("the first page holds %d of %d refs (%v), want a short page", len(page), len(refs), err)
	}
	orphans, unparsed, err := findOrphans(ctx, keys, meta.QueryRefs)
	if err != nil || len(unparsed) > 0 {
		t.Fatal(err, unparsed)
	}
	if len(orphans) > 0 {
		t.Fatalf("%d objects that refs point to reported as orphans, first %+v", len(orphans), orphans[0])
	}
}
