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
		yieldAfter(100 << 10)
	}
	if yields != 3 { // 1000 KiB of work crosses 256, 512 and 768 KiB
		t.Fatalf("%d yields after 1000 KiB of work, want 3", yields)
	}
	yieldAfter(0)
	yieldAfter(-5)
	yieldAfter(1 << 20) // from 1000 KiB to 2024: crosses 1024 (and 1280..1792), one yield
	if yields != 4 {
		t.Fatalf("%d yields after one 1 MiB piece, want 4 (one a piece at most)", yields)
	}
	seg, err := format.AppendSegment(nil, format.SegmentInfo{FirstSeq: 1, Count: 1}, make([]byte, 300<<10))
	if err != nil {
		t.Fatal(err)
	}
	cpuWork.Store(yieldBytes - 1)
	if err := checkSegment(seg); err != nil {
		t.Fatal(err)
	}
	if yields != 5 {
		t.Fatalf("%d yields after checking a 300 KiB segment, want 5", yields)
	}
}
