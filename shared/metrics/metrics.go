// Package metrics is the star's registry of counters, gauges and histograms,
// exposed with the Prometheus client library (prometheus/client_golang):
// the registry is a prometheus.Collector on a prometheus.Registry that also
// holds the Go runtime and process collectors, and promhttp serves it.
//
// A series keeps its value in its own atomics, and its labels are fixed
// when it is created, so the hot path is one atomic add (or, for a
// histogram, a bucket search and three atomic operations): no allocation,
// no lock, no label lookup. The client library reads the atomics at scrape
// time. CallInterceptor adds per-call codes, latencies, open sessions and
// read volumes of the API.
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Registry holds named series.
type Registry struct {
	mu     sync.Mutex
	series map[string]*family
	prom   *prometheus.Registry

	// The API's series (calls.go).
	procMu                 sync.Mutex
	procs                  atomic.Pointer[map[string]*callSeries]
	readRecords, readBytes *Counter
}

type family struct {
	name, help, typ string
	items           map[string]*item // by rendered label set
}

// item is one series: its label values and where its value is read.
type item struct {
	names, values []string
	w             writer
}

// writer is a series' value, read at scrape time.
type writer interface {
	metric(d *prometheus.Desc, values []string) (prometheus.Metric, error)
}

// NewRegistry returns an empty registry whose exposition also carries the
// Go runtime (go_*) and process (process_*) metrics.
func NewRegistry() *Registry {
	r := &Registry{series: map[string]*family{}, prom: prometheus.NewRegistry()}
	r.prom.MustRegister(r)
	r.prom.MustRegister(processCollectors()...)
	r.readRecords = r.Counter("strand_read_records_total", "Records answered by Read and ReadSession.")
	r.readBytes = r.Counter("strand_read_bytes_total", "Body bytes of the records answered by Read and ReadSession.")
	return r
}

// processCollectors are the Go runtime and process collectors, made once
// and shared by every registry (a simulation starts many stars).
var processCollectors = sync.OnceValue(func() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
})

// Describe implements prometheus.Collector: the registry is unchecked (its
// series are created as the star runs).
func (r *Registry) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector: every series, read now.
func (r *Registry) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	type one struct {
		d  *prometheus.Desc
		it *item
	}
	var all []one
	for _, f := range r.series {
		for _, it := range f.items {
			all = append(all, one{prometheus.NewDesc(f.name, f.help, it.names, nil), it})
		}
	}
	r.mu.Unlock()
	for _, o := range all {
		m, err := o.it.w.metric(o.d, o.it.values)
		if err != nil {
			m = prometheus.NewInvalidMetric(o.d, err)
		}
		ch <- m
	}
}

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
		f = &family{name: name, help: help, typ: typ, items: map[string]*item{}}
		r.series[name] = f
	}
	if f.typ != typ {
		panic(fmt.Sprintf("metrics: %s registered as %s and %s", name, f.typ, typ))
	}
	ls := labelString(labels)
	if it, ok := f.items[ls]; ok {
		return it.w
	}
	it := &item{w: mk()}
	for i := 0; i < len(labels); i += 2 {
		it.names, it.values = append(it.names, labels[i]), append(it.values, labels[i+1])
	}
	f.items[ls] = it
	return it.w
}

// Counter is a monotonically increasing count.
type Counter struct{ v atomic.Uint64 }

func (c *Counter) Add(n uint64) { c.v.Add(n) }
func (c *Counter) Inc()         { c.v.Add(1) }
func (c *Counter) Value() uint64 {
	return c.v.Load()
}
func (c *Counter) metric(d *prometheus.Desc, values []string) (prometheus.Metric, error) {
	return prometheus.NewConstMetric(d, prometheus.CounterValue, float64(c.v.Load()), values...)
}

// Gauge is a value that goes up and down.
type Gauge struct{ v atomic.Int64 }

func (g *Gauge) Set(n int64)  { g.v.Store(n) }
func (g *Gauge) Add(n int64)  { g.v.Add(n) }
func (g *Gauge) Value() int64 { return g.v.Load() }
func (g *Gauge) metric(d *prometheus.Desc, values []string) (prometheus.Metric, error) {
	return prometheus.NewConstMetric(d, prometheus.GaugeValue, float64(g.v.Load()), values...)
}

// GaugeFunc is a gauge read at scrape time.
type GaugeFunc func() float64

func (g GaugeFunc) metric(d *prometheus.Desc, values []string) (prometheus.Metric, error) {
	return prometheus.NewConstMetric(d, prometheus.GaugeValue, g(), values...)
}

// CounterFunc is a counter read at scrape time: f must never decrease.
type CounterFunc func() float64

func (c CounterFunc) metric(d *prometheus.Desc, values []string) (prometheus.Metric, error) {
	return prometheus.NewConstMetric(d, prometheus.CounterValue, c(), values...)
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

func (h *Histogram) metric(d *prometheus.Desc, values []string) (prometheus.Metric, error) {
	buckets := make(map[float64]uint64, len(h.bounds))
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		buckets[b] = cum
	}
	cum += h.counts[len(h.bounds)].Load()
	// The count is the buckets' sum, read with them (n may be a step ahead).
	return prometheus.NewConstHistogram(d, cum, math.Float64frombits(h.sum.Load()), buckets, values...)
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

// Write renders every series, the Go runtime's and the process's in the
// Prometheus text format (version 0.0.4), sorted by name.
func (r *Registry) Write(w io.Writer) {
	fams, err := r.prom.Gather()
	if err != nil {
		fmt.Fprintf(w, "# metrics: %v\n", err)
	}
	for _, f := range fams {
		_, _ = expfmt.MetricFamilyToText(w, f)
	}
}

// Handler serves the registry at /metrics (promhttp: text or, when asked,
// OpenMetrics).
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.prom, promhttp.HandlerOpts{EnableOpenMetrics: true})
}
