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
