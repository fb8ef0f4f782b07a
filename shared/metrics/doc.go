// Package metrics is the star's registry of counters, gauges and
// histograms, backed by prometheus/client_golang and served in the
// Prometheus exposition format on the admin address (docs/operations.md
// lists every series; ADR 0056 says why client_golang).
//
// A series is a family name plus its label values, fixed when the series is
// first asked for: the caller keeps the returned *Counter, *Gauge or
// *Histogram, and the hot path is then one atomic operation that allocates
// nothing (TestHotPathAllocatesNothing). Asking again for the same series
// returns the same value. A family's type and label names are fixed by its
// first series; asking for it with another type or other label names is a
// programming error and panics.
//
// Func series (GaugeFunc, CounterFunc) are read at scrape time, under no
// lock of the registry's: a func takes the locks it needs. The Go runtime
// and process collectors are added by RegisterRuntime (the node does; a
// test's registry stays without them). Write renders the text format
// (labels sorted by name, as client_golang does; tests/promtest reads it in
// any label order); Handler serves it, or what the scraper negotiates.
package metrics
