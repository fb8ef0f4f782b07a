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
	var keys []string
	refs := metastoretest.PaddedRefs(id.String(), 40, func(i uint64) metastore.Location {
		k := format.SettledKey(id, 10*i, 10*i+9)
		keys = append(keys, k)
		return metastore.Location{Settled: true, Key: k}
	})
	if err := metastoretest.PutPaged(ctx, meta, metastore.ChainID{Star: "star-0", Class: metastore.Standard}, refs); err != nil {
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
