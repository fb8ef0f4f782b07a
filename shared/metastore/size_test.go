package metastore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/metastore"
)

// TestQueryPage: a page ends at the limit or with the ref that brings the
// refs read to MaxQueryBytes (that ref included), never empty while refs
// remain.
func TestQueryPage(t *testing.T) {
	ref := func(first uint64, keyLen int) metastore.Ref {
		return metastore.Ref{StreamID: strings.Repeat("a", 32), FirstSeq: first, LastSeq: first,
			Locations: []metastore.Location{{Key: strings.Repeat("k", keyLen), Length: 1}}}
	}
	var refs []metastore.Ref
	for i := range 30 {
		refs = append(refs, ref(uint64(i), 100_000)) // about 100 KB each
	}
	size := metastore.RefSize(refs[0])
	crossing := (metastore.MaxQueryBytes + size - 1) / size // refs that reach 1 MB
	for _, tc := range []struct {
		limit, want int
	}{
		{1, 1},
		{crossing - 1, crossing - 1},
		{crossing, crossing},
		{crossing + 1, crossing},
		{100, crossing},
		{0, 0},
	} {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			if got := metastore.QueryPage(refs, tc.limit); len(got) != tc.want {
				t.Fatalf("QueryPage(%d refs of %d bytes, limit %d): %d refs, want %d", len(refs), size, tc.limit, len(got), tc.want)
			}
		})
	}
	huge := []metastore.Ref{ref(0, 2*metastore.MaxQueryBytes), ref(1, 10)}
	if got := metastore.QueryPage(huge, 10); len(got) != 1 {
		t.Fatalf("a first ref over 1 MB: %d refs, want that one ref alone", len(got))
	}
	if got := metastore.QueryPage(refs[:3], 10); len(got) != 3 {
		t.Fatalf("3 refs under 1 MB: %d refs, want all 3", len(got))
	}
}
