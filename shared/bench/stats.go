package bench

import (
	"runtime/metrics"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
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

// hist records latencies in an HdrHistogram (1 ns to 1 h, 3 significant
// digits: a quantile is within 0.1% of the exact one) instead of keeping
// and sorting raw samples. Values below zero (signed differences such as
// the overhead above a modelled floor, which clock noise can push under
// zero) are recorded shifted by the offset given at construction.
type hist struct {
	h      *hdrhistogram.Histogram
	offset time.Duration // added before recording; subtracted on the way out
	sum    time.Duration
}

const histMax = int64(time.Hour)

func newHist(offset time.Duration) *hist {
	return &hist{h: hdrhistogram.New(1, histMax, 3), offset: offset}
}

// record adds one value (clamped into the histogram's range).
func (h *hist) record(d time.Duration) {
	h.sum += d
	_ = h.h.RecordValue(min(max(int64(d+h.offset), 1), histMax)) // clamped: cannot fail
}

func (h *hist) merge(o *hist) {
	h.sum += o.sum
	h.h.Merge(o.h)
}

// quantile is the value at q (0..1).
func (h *hist) quantile(q float64) time.Duration {
	return time.Duration(h.h.ValueAtQuantile(q*100)) - h.offset
}

func (h *hist) percentiles() Percentiles {
	n := h.h.TotalCount()
	if n == 0 {
		return Percentiles{}
	}
	return Percentiles{N: int(n), Mean: ms(h.sum / time.Duration(n)), P50: ms(h.quantile(0.50)), P99: ms(h.quantile(0.99)),
		P999: ms(h.quantile(0.999)), Max: ms(time.Duration(h.h.Max()) - h.offset)}
}

// summarize records xs in a hist (shifted so that the smallest value is
// recordable) and returns its percentiles.
func summarize(xs []time.Duration) Percentiles {
	var lo time.Duration
	for _, x := range xs {
		lo = min(lo, x)
	}
	h := newHist(-lo)
	for _, x := range xs {
		h.record(x)
	}
	return h.percentiles()
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
