package bench

import (
	"math"
	"runtime/metrics"
	"slices"
	"time"
)

// Percentiles summarizes a latency sample, in milliseconds.
type Percentiles struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// summarize sorts xs in place.
func summarize(xs []time.Duration) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	slices.Sort(xs)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(xs)))) - 1
		return ms(xs[max(0, min(i, len(xs)-1))])
	}
	var sum time.Duration
	for _, x := range xs {
		sum += x
	}
	return Percentiles{N: len(xs), Mean: ms(sum / time.Duration(len(xs))), P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: ms(xs[len(xs)-1])}
}

// memSampler tracks the peak of the Go heap (live and unswept objects)
// and of all memory the runtime got from the OS, without stopping the
// world (runtime/metrics).
type memSampler struct {
	s           []metrics.Sample
	heap, total uint64
}

func newMemSampler() *memSampler {
	return &memSampler{s: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}}
}

func (m *memSampler) sample() {
	metrics.Read(m.s)
	if v := m.s[0].Value; v.Kind() == metrics.KindUint64 {
		m.heap = max(m.heap, v.Uint64())
	}
	if v := m.s[1].Value; v.Kind() == metrics.KindUint64 {
		m.total = max(m.total, v.Uint64())
	}
}
