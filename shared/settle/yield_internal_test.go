package settle

import (
	"sync"
	"testing"
	"time"

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
	if err := (&Settler{}).checkSegment(seg); err != nil {
		t.Fatal(err)
	}
	if yields != 5 {
		t.Fatalf("%d yields after checking a segment of yieldBytes, want 5", yields)
	}
}

// With CPUWorkers n, at most n goroutines are inside cpuBegin..cpuEnd at
// once; without it, any number; each cpuEnd counts its work toward a yield.
func TestCPUWorkersBound(t *testing.T) {
	for _, workers := range []int{1, 2, 0} {
		s := &Settler{CPUWorkers: workers}
		var mu sync.Mutex
		in, most := 0, 0
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 50 {
					s.cpuBegin()
					mu.Lock()
					in++
					most = max(most, in)
					mu.Unlock()
					time.Sleep(50 * time.Microsecond)
					mu.Lock()
					in--
					mu.Unlock()
					s.cpuEnd(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		switch {
		case workers > 0 && most > workers:
			t.Fatalf("CPUWorkers %d: %d at once", workers, most)
		case workers == 0 && most < 2:
			t.Fatalf("no bound: at most %d at once, want several", most)
		}
	}
}
