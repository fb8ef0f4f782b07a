package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/metrics"
)

// meters are the front end's series in the star's registry (docs/
// operations.md, "Kafka front end"). Created once; read-only after.
type meters struct {
	conns    *metrics.Gauge
	held     *metrics.Gauge
	refused  *metrics.Counter
	requests map[int16]*metrics.Counter
	seconds  map[int16]*metrics.Histogram
}

func newMeters(reg *metrics.Registry) *meters {
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	m := &meters{
		conns:    reg.Gauge("strand_kafka_connections", "open Kafka client connections"),
		held:     reg.Gauge("strand_kafka_held_request_bytes", "bytes of Kafka requests read and not yet answered (Limits.MaxHeldBytes)"),
		refused:  reg.Counter("strand_kafka_refused_total", "Kafka connections closed for a request past its bounds, undecodable, unserved or before SASL"),
		requests: map[int16]*metrics.Counter{},
		seconds:  map[int16]*metrics.Histogram{},
	}
	for k := range versions {
		name := kmsg.NameForKey(k)
		m.requests[k] = reg.Counter("strand_kafka_requests_total", "Kafka requests served, by API", "api", name)
		m.seconds[k] = reg.Histogram("strand_kafka_request_seconds", "from a Kafka request read to its answer ready (a produce: its acks), by API",
			metrics.LatencyBuckets, "api", name)
	}
	return m
}

// served counts a request answered after took.
func (m *meters) served(key int16, took time.Duration) {
	if c := m.requests[key]; c != nil {
		c.Inc()
		m.seconds[key].Observe(took.Seconds())
	}
}
