package star

import (
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

// review4: RecoverStream walks past a window part that a ref starting
// before it covers (a flush raced the window read) only when the ref is
// in the same page of RefsBefore. Here the first page (RecoverRefs-1
// entries) is all such parts and the covering ref is the first of the
// next page: the walk took the part for a hole and stopped, so the
// covering ref's and older refs' producer marks were not recovered (a
// resent batch of theirs would be written again).
func TestReview4CoveringRefOnTheNextPage(t *testing.T) {
	ref := func(first, last uint64, k byte) metastore.Ref {
		return metastore.Ref{StreamID: sid(1).String(), FirstSeq: first, LastSeq: last,
			Producers: []metastore.ProducerMark{{Producer: pid(k), BatchSeq: 0, FirstSeq: first, LastSeq: last}}}
	}
	// In seq order, as RefsBefore sorts them: the oldest ref, the
	// covering ref, RecoverRefs-1 one-seq parts it covers (up to 99,
	// short of the tail part at 101), and the tail part.
	parts := partsReader{ref(70, 79, 1), ref(80, 100, 2)}
	for s := uint64(100 - (RecoverRefs - 1)); s < 100; s++ {
		parts = append(parts, ref(s, s, 2))
	}
	parts = append(parts, ref(101, 110, 3))
	info, err := RecoverStream(t.Context(), parts, sid(1), metastore.Standard, time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	if info.Next != 111 || len(info.Producers) != 3 {
		t.Fatalf("tail %d, %d producers %+v; want 111 and 3 (the covering ref on the next page and the one before it read)", info.Next, len(info.Producers), info.Producers)
	}
}
