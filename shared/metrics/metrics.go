// Package metrics is a small, allocation-light registry of counters, gauges
// and histograms that renders the Prometheus text exposition format (version
// 0.0.4) on an admin port. Labels are fixed when a series is created, so the
// hot path is one atomic add.
package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds named series.
type Registry struct {
	mu     sync.Mutex
	series map[string]*family
}

type family struct {
	name, help, typ string
	items           map[string]writer // by rendered label set
}

type writer interface {
	write(w io.Writer, name, labels string)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{series: map[string]*family{}} }

func labelString(kv []string) string {
	if len(kv)%2 != 0 {
		panic("metrics: labels must be name/value pairs")
	}
	if len(kv) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", kv[i], kv[i+1])
	}
	b.WriteByte('}')
	return b.String()
}

func (r *Registry) get(name, help, typ string, labels []string, mk func() writer) writer {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.series[name]
	if f == nil {
		f = &family{name: name, help: help, typ: typ, items: map[string]writer{}}
		r.series[name] = f
	}
	if f.typ != typ {
		panic(fmt.Sprintf("metrics: %s registered as %s and %s", name, f.typ, typ))
	}
	ls := labelString(labels)
	if w, ok := f.items[ls]; ok {
		return w
	}
	w := mk()
	f.items[ls] = w
	return w
}

// Counter is a monotonically increasing count.
type Counter struct{ v atomic.Uint64 }

func (c *Counter) Add(n uint64) { c.v.Add(n) }
func (c *Counter) Inc()         { c.v.Add(1) }
func (c *Counter) Value() uint64 {
	return c.v.Load()
}
func (c *Counter) write(w io.Writer, name, labels string) {
	fmt.Fprintf(w, "%s%s %d\n", name, labels, c.v.Load())
}

// Gauge is a value that goes up and down.
type Gauge struct{ v atomic.Int64 }

func (g *Gauge) Set(n int64)  { g.v.Store(n) }
func (g *Gauge) Add(n int64)  { g.v.Add(n) }
func (g *Gauge) Value() int64 { return g.v.Load() }
func (g *Gauge) write(w io.Writer, name, labels string) {
	fmt.Fprintf(w, "%s%s %d\n", name, labels, g.v.Load())
}

// GaugeFunc is a gauge read at scrape time.
type GaugeFunc func() float64

func (g GaugeFunc) write(w io.Writer, name, labels string) {
	fmt.Fprintf(w, "%s%s %g\n", name, labels, g())
}

// CounterFunc is a counter read at scrape time: f must never decrease.
type CounterFunc func() float64

func (c CounterFunc) write(w io.Writer, name, labels string) {
	fmt.Fprintf(w, "%s%s %g\n", name, labels, c())
}

// Histogram counts observations (seconds, bytes, ...) into fixed buckets.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // len(bounds)+1
	sum    atomic.Uint64   // float64 bits
	n      atomic.Uint64
}

// Observe records v.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i].Add(1)
	h.n.Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 { return h.n.Load() }

func (h *Histogram) write(w io.Writer, name, labels string) {
	inner := strings.TrimSuffix(strings.TrimPrefix(labels, "{"), "}")
	sep := ""
	if inner != "" {
		sep = ","
	}
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"%g\"} %d\n", name, inner, sep, b, cum)
	}
	cum += h.counts[len(h.bounds)].Load()
	fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, inner, sep, cum)
	fmt.Fprintf(w, "%s_sum%s %g\n", name, labels, math.Float64frombits(h.sum.Load()))
	fmt.Fprintf(w, "%s_count%s %d\n", name, labels, h.n.Load())
}

// LatencyBuckets are histogram bounds in seconds from 100µs to 30s.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Counter returns the counter name{labels}, creating it once.
func (r *Registry) Counter(name, help string, labels ...string) *Counter {
	return r.get(name, help, "counter", labels, func() writer { return &Counter{} }).(*Counter)
}

// Gauge returns the gauge name{labels}, creating it once.
func (r *Registry) Gauge(name, help string, labels ...string) *Gauge {
	return r.get(name, help, "gauge", labels, func() writer { return &Gauge{} }).(*Gauge)
}

// GaugeFunc registers f as the gauge name{labels}; a second registration of
// the same series keeps the first.
func (r *Registry) GaugeFunc(name, help string, f func() float64, labels ...string) {
	r.get(name, help, "gauge", labels, func() writer { return GaugeFunc(f) })
}

// CounterFunc registers f as the counter name{labels} (f never
// decreases); a second registration of the same series keeps the first.
func (r *Registry) CounterFunc(name, help string, f func() float64, labels ...string) {
	r.get(name, help, "counter", labels, func() writer { return CounterFunc(f) })
}

// Histogram returns the histogram name{labels} with the given bounds,
// creating it once.
func (r *Registry) Histogram(name, help string, bounds []float64, labels ...string) *Histogram {
	return r.get(name, help, "histogram", labels, func() writer {
		return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
	}).(*Histogram)
}

// Write renders every series in the Prometheus text format, sorted.
func (r *Registry) Write(w io.Writer) {
	r.mu.Lock()
	names := make([]string, 0, len(r.series))
	for n := range r.series {
		names = append(names, n)
	}
	sort.Strings(names)
	fams := make([]*family, len(names))
	for i, n := range names {
		fams[i] = r.series[n]
	}
	r.mu.Unlock()
	for _, f := range fams {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
		r.mu.Lock()
		keys := make([]string, 0, len(f.items))
		for k := range f.items {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		items := make([]writer, len(keys))
		for i, k := range keys {
			items[i] = f.items[k]
		}
		r.mu.Unlock()
		for i, it := range items {
			it.write(w, f.name, keys[i])
		}
	}
}

// Handler serves the registry at /metrics.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		r.Write(w)
	})
}
