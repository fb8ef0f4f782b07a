package metrics

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestExposition(t *testing.T) {
	r := NewRegistry()
	r.Counter("strand_appends_total", "Appends acked.", "class", "express").Add(3)
	r.Counter("strand_appends_total", "Appends acked.", "class", "express").Inc()
	r.Gauge("strand_pool_bytes", "Pool bytes.").Set(-2)
	h := r.Histogram("strand_ack_seconds", "Ack latency.", []float64{0.1, 1}, "class", "standard")
	h.Observe(0.05)
	h.Observe(0.5)
	h.Observe(5)
	r.GaugeFunc("strand_backlog_age_seconds", "Age.", func() float64 { return 1.5 })
	r.CounterFunc("strand_window_cache_gets_total", "GETs.", func() float64 { return 7 })
	var b bytes.Buffer
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# TYPE strand_appends_total counter",
		`strand_appends_total{class="express"} 4`,
		"strand_pool_bytes -2",
		`strand_ack_seconds_bucket{class="standard",le="0.1"} 1`,
		`strand_ack_seconds_bucket{class="standard",le="1"} 2`,
		`strand_ack_seconds_bucket{class="standard",le="+Inf"} 3`,
		`strand_ack_seconds_sum{class="standard"} 5.55`,
		`strand_ack_seconds_count{class="standard"} 3`,
		"strand_backlog_age_seconds 1.5",
		"# TYPE strand_window_cache_gets_total counter",
		"strand_window_cache_gets_total 7",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "go_goroutines") || strings.Contains(out, "process_") {
		t.Errorf("runtime series in a registry without RegisterRuntime:\n%s", out)
	}
}

// TestSeriesOnce: asking again for a series returns the same one; a func
// series registered twice keeps the first; values read back.
func TestSeriesOnce(t *testing.T) {
	r := NewRegistry()
	a := r.Counter("c_total", "C.", "k", "v")
	if b := r.Counter("c_total", "", "k", "v"); a != b {
		t.Fatal("a second Counter call made a second series")
	}
	a.Add(41)
	a.Inc()
	if v := r.Counter("c_total", "", "k", "v").Value(); v != 42 {
		t.Fatalf("counter %d, want 42", v)
	}
	if v := r.Counter("c_total", "", "k", "w").Value(); v != 0 {
		t.Fatalf("other labels: %d, want 0", v)
	}
	g := r.Gauge("g", "G.")
	g.Add(5)
	g.Add(-7)
	if g.Value() != -2 {
		t.Fatalf("gauge %d, want -2", g.Value())
	}
	h := r.Histogram("h_seconds", "H.", LatencyBuckets)
	h.Observe(1)
	h.Observe(2)
	if h.Count() != 2 {
		t.Fatalf("histogram count %d, want 2", h.Count())
	}
	r.GaugeFunc("f", "F.", func() float64 { return 1 }, "k", "v")
	r.GaugeFunc("f", "F.", func() float64 { return 2 }, "k", "v")
	r.GaugeFunc("f", "F.", func() float64 { return 3 }, "k", "w")
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`f{k="v"} 1` + "\n", `f{k="w"} 3` + "\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}

// TestMisuse: a family asked for with another type or other label names,
// or with an odd label list, panics (a programming error, caught by the
// first test that registers it).
func TestMisuse(t *testing.T) {
	for name, f := range map[string]func(r *Registry){
		"type":       func(r *Registry) { r.Gauge("x_total", "X.", "k", "v") },
		"func type":  func(r *Registry) { r.CounterFunc("x_total", "X.", func() float64 { return 0 }, "k", "v") },
		"label name": func(r *Registry) { r.Counter("x_total", "X.", "j", "v") },
		"label set":  func(r *Registry) { r.Counter("x_total", "X.", "k", "v", "j", "w") },
		"odd labels": func(r *Registry) { r.Counter("y_total", "Y.", "k") },
	} {
		t.Run(name, func(t *testing.T) {
			r := NewRegistry()
			r.Counter("x_total", "X.", "k", "v")
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f(r)
		})
	}
}

// TestHotPathAllocatesNothing: updating a series the caller holds (what
// the append, release and read paths do) allocates nothing.
func TestHotPathAllocatesNothing(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "C.", "class", "express")
	g := r.Gauge("g", "G.", "procedure", "ReadSession")
	h := r.Histogram("h_seconds", "H.", LatencyBuckets, "class", "express")
	v := 0.0
	allocs := testing.AllocsPerRun(1000, func() {
		c.Inc()
		c.Add(4096)
		g.Add(1)
		g.Add(-1)
		h.Observe(v)
		v += 0.001
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per update", allocs)
	}
	if c.Value() != 1001*4097 || h.Count() != 1001 {
		t.Fatalf("counter %d, histogram count %d after 1001 runs", c.Value(), h.Count())
	}
}

// TestRuntimeAndHandler: RegisterRuntime adds the Go and process
// collectors (twice is once), and Handler serves the text format.
func TestRuntimeAndHandler(t *testing.T) {
	r := NewRegistry()
	r.Counter("strand_x_total", "X.").Inc()
	for range 2 {
		if err := r.RegisterRuntime(); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("content type %q", ct)
	}
	want := []string{"\nstrand_x_total 1\n", "\ngo_goroutines ", "\ngo_memstats_heap_alloc_bytes "}
	if runtime.GOOS == "linux" { // the process collector's series are Linux's
		want = append(want, "\nprocess_resident_memory_bytes ", "\nprocess_open_fds ")
	}
	for _, want := range want {
		if !strings.Contains("\n"+string(body), want) {
			t.Errorf("missing %q", want)
		}
	}
}

// TestConcurrentUse: series asked for, updated and registered from several
// goroutines while the registry is scraped (run with -race) end with every
// update counted.
func TestConcurrentUse(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				r.Counter("c_total", "C.", "k", fmt.Sprint(i%3)).Inc()
				r.Histogram("h_seconds", "H.", LatencyBuckets).Observe(float64(i) / 100)
				r.GaugeFunc("f", "F.", func() float64 { return float64(g) }, "g", fmt.Sprint(g))
			}
		}()
	}
	for range 20 {
		if err := r.Write(io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	var total uint64
	for k := range 3 {
		total += r.Counter("c_total", "", "k", fmt.Sprint(k)).Value()
	}
	if total != 800 || r.Histogram("h_seconds", "", LatencyBuckets).Count() != 800 {
		t.Fatalf("%d increments, %d observations counted; want 800 each", total, r.Histogram("h_seconds", "", LatencyBuckets).Count())
	}
}
