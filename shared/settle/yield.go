package settle

import (
	"runtime"
	"sync/atomic"
)

// yieldBytes is how much of settle's CPU work (a CRC checked, bytes
// copied into an object) runs between two yields of the processor.
const yieldBytes = 64 << 10

// cpuWork counts settle's CPU work in bytes, across Settlers.
var cpuWork atomic.Int64

// yieldAfter counts n bytes of CPU work done and yields the processor
// (runtime.Gosched) at every yieldBytes. Settle beside a star in one
// process (`strand bench`, `strand dev`) shares its processors: a step
// checks and copies about a second of the star's ingest in one burst on
// every processor, and Go's scheduler lets a running goroutine keep its
// processor for up to 10 ms before it preempts it, so the star's
// goroutines woken meanwhile (an ack) waited behind settle's. Yielding
// every 64 KiB (microseconds of work, or about a millisecond when it
// first touches memory while other threads do: page faults) lets them run
// first; 256 KiB left more of the star's ordered overhead p99 at 100 MB/s
// over 1 ms (docs/performance/ingest.md). In a
// Lambda settle runs alone, and a yield with nothing else to run costs
// well under a microsecond.
func yieldAfter(n int) {
	if n <= 0 {
		return
	}
	v := cpuWork.Add(int64(n))
	if v/yieldBytes != (v-int64(n))/yieldBytes {
		gosched()
	}
}

// gosched is runtime.Gosched (a variable so that a test counts yields).
var gosched = runtime.Gosched

// cpuBegin waits for one of s's CPUWorkers slots (none without a bound).
func (s *Settler) cpuBegin() {
	s.cpuOnce.Do(func() {
		if s.CPUWorkers > 0 {
			s.cpuSem = make(chan struct{}, s.CPUWorkers)
		}
	})
	if s.cpuSem != nil {
		s.cpuSem <- struct{}{}
	}
}

// cpuEnd gives cpuBegin's slot back after n bytes of work, and yields
// (yieldAfter) outside it.
func (s *Settler) cpuEnd(n int) {
	if s.cpuSem != nil {
		<-s.cpuSem
	}
	yieldAfter(n)
}
