package read

import (
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metrics"
	"github.com/strandlog/strand/shared/star"
)

// Metrics count what a Reader's reads and sessions serve
// (docs/operations.md, metrics).
type Metrics struct {
	records, bytes, waits *metrics.Counter
}

// NewMetrics registers the read series in reg.
func NewMetrics(reg *metrics.Registry) *Metrics {
	return &Metrics{
		records: reg.Counter("strand_read_records_total", "Records served by Read and ReadSession."),
		bytes:   reg.Counter("strand_read_bytes_total", "Metered bytes (body and headers) of the records served by Read and ReadSession."),
		waits:   reg.Counter("strand_read_tail_waits_total", "Times a read session reached the tail and waited for records (a release or the heartbeat ends each wait)."),
	}
}

// Register counts r's reads in reg (Metrics) and exports its segment cache
// and read-ahead budget, read at scrape time. Call it once, after setting
// Cache and AheadBudget.
func (r *Reader) Register(reg *metrics.Registry) {
	r.Metrics = NewMetrics(reg)
	c, b := r.segmentCache(), r.aheadBudget()
	stat := func(f func(CacheStats) int64) func() float64 {
		return func() float64 { return float64(f(c.Stats())) }
	}
	reg.CounterFunc("strand_read_cache_hits_total", "Segment reads served by the read cache.", stat(func(s CacheStats) int64 { return s.Hits }))
	reg.CounterFunc("strand_read_cache_joined_total", "Segment reads that waited on a fetch another reader started.", stat(func(s CacheStats) int64 { return s.Joined }))
	reg.CounterFunc("strand_read_cache_fetches_total", "Segment fetches the read cache started (misses).", stat(func(s CacheStats) int64 { return s.Fetches }))
	reg.CounterFunc("strand_read_cache_evictions_total", "Segments the read cache evicted for room.", stat(func(s CacheStats) int64 { return s.Evicted }))
	reg.GaugeFunc("strand_read_cache_bytes", "Bytes the read cache holds (encoded segments and their records' headers).", stat(func(s CacheStats) int64 { return s.Bytes }))
	reg.GaugeFunc("strand_read_ahead_bytes", "Bytes the read sessions' read-ahead holds now.", func() float64 { return float64(b.Used()) })
	reg.GaugeFunc("strand_read_ahead_budget_bytes", "The read-ahead budget of all sessions together (--read-ahead-mib).", func() float64 { return float64(b.Total()) })
}

// served counts recs, served to a client.
func (m *Metrics) served(recs []star.SeqRecord) {
	if m == nil || len(recs) == 0 {
		return
	}
	var b uint64
	for _, rec := range recs {
		b += uint64(format.MeteredSize(rec.Record))
	}
	m.records.Add(uint64(len(recs)))
	m.bytes.Add(b)
}

// waited counts a session's wait at the tail.
func (m *Metrics) waited() {
	if m != nil {
		m.waits.Inc()
	}
}
