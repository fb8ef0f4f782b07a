package bench

import (
	"math"
	"runtime/metrics"
)

// schedSnap is the runtime's histograms of how long goroutines waited
// runnable for a processor (/sched/latencies:seconds) and of stop-the-world
// pauses (/sched/pauses/total/gc:seconds), at one moment: two of them
// bound a window (schedWait).
type schedSnap struct {
	wait, pause *metrics.Float64Histogram
}

var schedMetrics = []string{"/sched/latencies:seconds", "/sched/pauses/total/gc:seconds"}

func takeSched() schedSnap {
	s := make([]metrics.Sample, len(schedMetrics))
	for i, n := range schedMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	var out schedSnap
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		out.wait = s[0].Value.Float64Histogram()
	}
	if s[1].Value.Kind() == metrics.KindFloat64Histogram {
		out.pause = s[1].Value.Float64Histogram()
	}
	return out
}

// schedWait is the window's scheduler waits and GC pauses between a and
// b, as percentiles in ms: each quantile is its bucket's upper bound (the
// runtime's buckets are within 1/8 of a power of two), the maximum the
// highest bucket reached. The runtime samples the waits (one in eight
// scheduling events), so N counts the samples.
func schedWait(a, b schedSnap) (wait, pause Percentiles) {
	return histDiff(a.wait, b.wait), histDiff(a.pause, b.pause)
}

func histDiff(a, b *metrics.Float64Histogram) Percentiles {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return Percentiles{}
	}
	counts := make([]uint64, len(b.Counts))
	var n uint64
	var sum float64
	for i := range counts {
		counts[i] = b.Counts[i] - a.Counts[i]
		n += counts[i]
		if c := counts[i]; c > 0 {
			sum += float64(c) * mid(b.Buckets[i], b.Buckets[i+1])
		}
	}
	if n == 0 {
		return Percentiles{}
	}
	q := func(f float64) float64 {
		want := uint64(math.Ceil(f * float64(n)))
		var seen uint64
		for i, c := range counts {
			seen += c
			if seen >= want && c > 0 {
				return upper(b.Buckets[i+1], b.Buckets[i]) * 1e3
			}
		}
		return 0
	}
	return Percentiles{N: int(n), Mean: sum / float64(n) * 1e3, P50: q(0.5), P99: q(0.99), P999: q(0.999), Max: q(1)}
}

// upper is a bucket's upper bound, its lower one when that is infinite.
func upper(hi, lo float64) float64 {
	if math.IsInf(hi, 1) {
		return lo
	}
	return hi
}

func mid(lo, hi float64) float64 {
	switch {
	case math.IsInf(lo, -1):
		return hi
	case math.IsInf(hi, 1):
		return lo
	}
	return (lo + hi) / 2
}
