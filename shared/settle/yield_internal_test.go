package settle

import (
	"testing"

	"github.com/strandlog/strand/shared/format"
)

// Settle yields its processor once per yieldBytes of CPU work, whatever
// the sizes of the pieces of work; and checking a segment counts as work.
func TestYieldAfterEveryYieldBytes(t *testing.T) {
	yields := 0
	old := gosched
	gosched = func() { yields++ }
	defer func() { gosched = old }()
	cpuWork.Store(0)
	for range 10 {
		yieldAfter(yieldBytes * 4 / 10)
	}
	if yields != 3 { // 4 yieldBytes of work crosses 1, 2 and 3 (4 is not reached: 10 * 4/10 rounds down)
		t.Fatalf("%d yields after 4 yieldBytes of work in tenths, want 3", yields)
	}
	yieldAfter(0)
	yieldAfter(-5)
	yieldAfter(16 * yieldBytes) // crosses 16 multiples: one yield a piece at most
	if yields != 4 {
		t.Fatalf("%d yields after one large piece, want 4", yields)
	}
	seg, err := format.AppendSegment(nil, format.SegmentInfo{FirstSeq: 1, Count: 1}, make([]byte, yieldBytes))
	if err != nil {
		t.Fatal(err)
	}
	cpuWork.Store(yieldBytes - 1)
	if err := checkSegment(seg); err != nil {
		t.Fatal(err)
	}
	if yields != 5 {
		t.Fatalf("%d yields after checking a segment of yieldBytes, want 5", yields)
	}
}
