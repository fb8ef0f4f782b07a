package star

import (
	"testing"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// maxWindow is the largest Standard --s3-parallel-uploads Validate
// accepts (searched up to hi).
func maxWindow(t *testing.T, hi int) int {
	t.Helper()
	ok := func(w int) bool {
		c := Defaults()
		c.Standard.Buckets = []objstore.Bucket{objstore.NewMem("b0")}
		c.Standard.ParallelUploads = w
		return c.Validate() == nil
	}
	if !ok(1) {
		t.Fatal("the defaults with a window of 1 do not validate")
	}
	lo := 1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// Invariant (ADR 0062, "Why it is exact"; MaxRecoverRefs' comment):
// RecoverStream reads back to the newest carried table's acknowledged
// tail for every pipeline window the configuration accepts. Worst case:
// each flight is its own part, the whole window (--s3-parallel-uploads)
// is in flight at the carrying cut, and CarryEvery-1 parts follow the
// carrying one. Every batch of the history must be recovered (the
// reference window: TrimMarks of the history).
func TestReviewRecoverCoversEveryAcceptedWindow(t *testing.T) {
	w := maxWindow(t, 4096)
	var parts []metastore.Ref
	var history []metastore.ProducerMark
	batch := map[byte]uint64{}
	flight := func(k int) metastore.Ref {
		p := pid(byte(1 + k%250))
		m := metastore.ProducerMark{Producer: p, BatchSeq: batch[p[0]], FirstSeq: uint64(k), LastSeq: uint64(k)}
		batch[p[0]]++
		history = append(history, m)
		return metastore.Ref{StreamID: sid(1).String(), FirstSeq: uint64(k), LastSeq: uint64(k), Producers: []metastore.ProducerMark{m}}
	}
	// Flight 0 released before the cut; flights 1..w in flight at it;
	// flight w+1 carries the table (flight 0's mark, below seq 1).
	parts = append(parts, flight(0))
	for k := 1; k <= w; k++ {
		parts = append(parts, flight(k))
	}
	c := flight(w + 1)
	c.Carried, c.CarriedBelow = []metastore.ProducerMark{history[0]}, 1
	parts = append(parts, c)
	for k := w + 2; k < w+1+CarryEvery; k++ {
		parts = append(parts, flight(k))
	}
	for _, r := range parts {
		if err := metastore.ValidateRef(withLocation(r)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("window %d: %d parts, the carrying one %d from the end", w, len(parts), CarryEvery-1)
	checkWindow(t, uint64(w), "the deepest accepted window", parts, history)
}
