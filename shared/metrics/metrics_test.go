package metrics

import (
	"bytes"
	"strings"
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
	r.Write(&b)
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
		// The client library's runtime and process collectors (issue 34:
		// there were no Go runtime or process metrics).
		"# TYPE go_goroutines gauge",
		"go_memstats_heap_inuse_bytes ",
		"process_resident_memory_bytes ",
		"process_open_fds ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
