package metrics

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Registry holds named series.
type Registry struct {
	reg *prometheus.Registry

	mu   sync.Mutex
	fams map[string]*family
}

// kinds of a family.
const (
	kindCounter     = "counter"
	kindGauge       = "gauge"
	kindHistogram   = "histogram"
	kindCounterFunc = "counter (func)"
	kindGaugeFunc   = "gauge (func)"
)

type family struct {
	kind   string
	labels []string       // label names, in the order first given
	items  map[string]any // by label values joined with 0xff: *Counter, *Gauge, *Histogram or funcs' first f

	vec   *prometheus.MetricVec // counters, gauges, histograms
	funcs *funcCollector        // func series
}

// NewRegistry returns an empty registry (no runtime or process series:
// see RegisterRuntime).
func NewRegistry() *Registry {
	return &Registry{reg: prometheus.NewRegistry(), fams: map[string]*family{}}
}

// RegisterRuntime adds the Go runtime (go_*) and process (process_*)
// collectors. A second call adds nothing.
func (r *Registry) RegisterRuntime() error {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := r.reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return fmt.Errorf("metrics: register the runtime collectors: %w", err)
		}
	}
	return nil
}

// split turns name/value pairs into names and values.
func split(kv []string) (names, values []string) {
	if len(kv)%2 != 0 {
		panic("metrics: labels must be name/value pairs")
	}
	for i := 0; i < len(kv); i += 2 {
		names = append(names, kv[i])
		values = append(values, kv[i+1])
	}
	return names, values
}

// series returns the item of name{kv}, making the family with mkFam and the
// item with mkItem the first time each is asked for.
func (r *Registry) series(name, help, kind string, kv []string, mkFam func(f *family, names []string) prometheus.Collector, mkItem func(f *family, values []string) any) any {
	names, values := split(kv)
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.fams[name]
	if f == nil {
		f = &family{kind: kind, labels: names, items: map[string]any{}}
		r.reg.MustRegister(mkFam(f, names))
		r.fams[name] = f
	}
	if f.kind != kind {
		panic(fmt.Sprintf("metrics: %s registered as a %s and asked for as a %s", name, f.kind, kind))
	}
	if !slices.Equal(f.labels, names) {
		panic(fmt.Sprintf("metrics: %s has labels %v, asked for with %v", name, f.labels, names))
	}
	key := strings.Join(values, "\xff")
	if it, ok := f.items[key]; ok {
		return it
	}
	it := mkItem(f, values)
	f.items[key] = it
	return it
}

// Counter is a monotonically increasing count.
type Counter struct{ c prometheus.Counter }

// Add adds n.
func (c *Counter) Add(n uint64) { c.c.Add(float64(n)) }

// Inc adds 1.
func (c *Counter) Inc() { c.c.Inc() }

// Value is the count (tests and diagnostics: it allocates).
func (c *Counter) Value() uint64 { return uint64(read(c.c).GetCounter().GetValue()) }

// Gauge is a value that goes up and down.
type Gauge struct{ g prometheus.Gauge }

// Set sets the gauge to n.
func (g *Gauge) Set(n int64) { g.g.Set(float64(n)) }

// Add adds n (negative: subtracts).
func (g *Gauge) Add(n int64) { g.g.Add(float64(n)) }

// Value is the gauge's value (tests and diagnostics: it allocates).
func (g *Gauge) Value() int64 { return int64(read(g.g).GetGauge().GetValue()) }

// Histogram counts observations (seconds, bytes, ...) into fixed buckets.
type Histogram struct{ h prometheus.Histogram }

// Observe records v.
func (h *Histogram) Observe(v float64) { h.h.Observe(v) }

// Count is the number of observations (tests and diagnostics: it
// allocates).
func (h *Histogram) Count() uint64 {
	return read(h.h.(prometheus.Metric)).GetHistogram().GetSampleCount()
}

// read is m's current value (a client_golang counter, gauge or histogram
// never fails to write itself).
func read(m prometheus.Metric) *dto.Metric {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(fmt.Sprintf("metrics: read %s: %v", m.Desc(), err))
	}
	return &d
}

// LatencyBuckets are histogram bounds in seconds from 100µs to 30s.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Counter returns the counter name{labels} (name/value pairs), creating it
// once.
func (r *Registry) Counter(name, help string, labels ...string) *Counter {
	return r.series(name, help, kindCounter, labels, r.vec(func(names []string) *prometheus.MetricVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, names).MetricVec
	}), child(func(m prometheus.Metric) any { return &Counter{c: m.(prometheus.Counter)} })).(*Counter)
}

// Gauge returns the gauge name{labels}, creating it once.
func (r *Registry) Gauge(name, help string, labels ...string) *Gauge {
	return r.series(name, help, kindGauge, labels, r.vec(func(names []string) *prometheus.MetricVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, names).MetricVec
	}), child(func(m prometheus.Metric) any { return &Gauge{g: m.(prometheus.Gauge)} })).(*Gauge)
}

// Histogram returns the histogram name{labels} with the given bounds,
// creating it once; the family's bounds are those of its first series.
func (r *Registry) Histogram(name, help string, bounds []float64, labels ...string) *Histogram {
	return r.series(name, help, kindHistogram, labels, r.vec(func(names []string) *prometheus.MetricVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: bounds}, names).MetricVec
	}), child(func(m prometheus.Metric) any { return &Histogram{h: m.(prometheus.Histogram)} })).(*Histogram)
}

// child makes the series of a vector family: wrap of its client_golang
// metric.
func child(wrap func(prometheus.Metric) any) func(f *family, values []string) any {
	return func(f *family, values []string) any {
		m, err := f.vec.GetMetricWithLabelValues(values...)
		if err != nil { // series checked the label names: a broken invariant
			panic(fmt.Sprintf("metrics: %v", err))
		}
		return wrap(m)
	}
}

// vec makes a family of a client_golang vector.
func (r *Registry) vec(mk func(names []string) *prometheus.MetricVec) func(f *family, names []string) prometheus.Collector {
	return func(f *family, names []string) prometheus.Collector {
		f.vec = mk(names)
		return f.vec
	}
}

// GaugeFunc registers f as the gauge name{labels}, read at scrape time; a
// second registration of the same series keeps the first.
func (r *Registry) GaugeFunc(name, help string, f func() float64, labels ...string) {
	r.fn(name, help, kindGaugeFunc, prometheus.GaugeValue, f, labels)
}

// CounterFunc registers f as the counter name{labels}, read at scrape time
// (f never decreases); a second registration of the same series keeps the
// first.
func (r *Registry) CounterFunc(name, help string, f func() float64, labels ...string) {
	r.fn(name, help, kindCounterFunc, prometheus.CounterValue, f, labels)
}

func (r *Registry) fn(name, help, kind string, vt prometheus.ValueType, f func() float64, labels []string) {
	r.series(name, help, kind, labels, func(fam *family, names []string) prometheus.Collector {
		fam.funcs = &funcCollector{desc: prometheus.NewDesc(name, help, names, nil), vt: vt}
		return fam.funcs
	}, func(fam *family, values []string) any { return fam.funcs.add(values, f) })
}

// funcCollector reads a family's func series at scrape time.
type funcCollector struct {
	desc *prometheus.Desc
	vt   prometheus.ValueType

	mu    sync.Mutex
	items []funcItem
}

type funcItem struct {
	values []string
	f      func() float64
}

func (c *funcCollector) add(values []string, f func() float64) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = append(c.items, funcItem{values, f})
	return f
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	items := slices.Clone(c.items)
	c.mu.Unlock()
	for _, it := range items {
		ch <- prometheus.MustNewConstMetric(c.desc, c.vt, it.f(), it.values...)
	}
}

// Write renders every series in the Prometheus text format (0.0.4), sorted
// by name and labels. An error gathering some series (a collector that
// failed) is returned after the series that could be gathered are written.
func (r *Registry) Write(w io.Writer) error {
	mfs, gerr := r.reg.Gather()
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			return fmt.Errorf("metrics: write %s: %w", mf.GetName(), err)
		}
	}
	if gerr != nil {
		return fmt.Errorf("metrics: gather: %w", gerr)
	}
	return nil
}

// Handler serves the registry at /metrics (text format, or what the
// scraper negotiates); a collector that fails leaves out its own series
// only.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
