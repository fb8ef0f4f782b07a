package bench

import (
	"math"
	"runtime/metrics"
	"testing"
)

// The window's waits are the difference of two snapshots' histograms, each
// quantile its bucket's upper bound, the maximum the highest bucket
// reached; snapshots of different shapes (or none) give nothing.
func TestHistDiff(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0, 1e-4, 1e-3, 1e-2, math.Inf(1)}
	a := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{0, 500, 10, 0, 0}}
	b := &metrics.Float64Histogram{Buckets: buckets, Counts: []uint64{0, 1490, 19, 1, 0}}
	p := histDiff(a, b)
	if p.N != 1000 {
		t.Fatalf("n %d, want 1000 (the window's only)", p.N)
	}
	if p.P50 != 0.1 || p.P99 != 0.1 || p.P999 != 1 || p.Max != 10 {
		t.Fatalf("p50 %v p99 %v p999 %v max %v ms, want 0.1, 0.1, 1, 10", p.P50, p.P99, p.P999, p.Max)
	}
	b.Counts[4] = 1 // one wait past the last finite bound: its lower bound
	if p := histDiff(a, b); p.Max != 10 || p.N != 1001 {
		t.Fatalf("max %v n %d, want 10 ms and 1001", p.Max, p.N)
	}
	if p := histDiff(a, &metrics.Float64Histogram{Buckets: buckets[:3], Counts: []uint64{1, 2}}); p.N != 0 {
		t.Fatalf("different shapes gave %+v", p)
	}
	if p := histDiff(nil, b); p.N != 0 {
		t.Fatalf("no snapshot gave %+v", p)
	}
	if p := histDiff(b, b); p.N != 0 {
		t.Fatalf("an empty window gave %+v", p)
	}
	// The runtime's own histograms are there to read.
	s := takeSched()
	if s.wait == nil || s.pause == nil {
		t.Fatalf("the runtime's scheduler histograms were not read: %+v", s)
	}
}
