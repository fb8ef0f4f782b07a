package settle

import (
	"testing"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metastoretest"
)

// TestRefsPastOnePage: settle's ref reader returns every ref of the span,
// past QueryRefs pages cut short at DynamoDB's 1 MB. It took a page
// shorter than its limit for the end of the refs, and so settled a span
// with refs missing.
func TestRefsPastOnePage(t *testing.T) {
	ctx := t.Context()
	id := format.StreamID{0xa}
	meta := metastore.NewMem()
	refs := metastoretest.PaddedRefs(id.String(), 40, func(i uint64) metastore.Location {
		return metastore.Location{Key: format.SlotKey("star-0", 1, i), Offset: 60}
	})
	if err := metastoretest.PutPaged(ctx, meta, metastore.ChainID{Star: "star-0", Class: metastore.Standard}, refs); err != nil {
		t.Fatal(err)
	}
	if page, err := meta.QueryRefs(ctx, id.String(), 0, 100); err != nil || len(page) >= len(refs) {
		t.Fatalf("the first page holds %d of %d refs (%v), want a short page", len(page), len(refs), err)
	}
	s := &Settler{Meta: meta}
	got, err := s.refs(ctx, id, 11, 369)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 36 || got[0].FirstSeq != 10 || got[len(got)-1].FirstSeq != 360 {
		t.Fatalf("refs of seqs 10 to 369: %d refs, want 36 from ref 10 to ref 360", len(got))
	}
}
