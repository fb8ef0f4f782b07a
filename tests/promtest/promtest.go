// Package promtest reads series from a Prometheus text exposition (what
// metrics.Registry.Write renders) in tests. A series that is not in the
// exposition is an error, never 0: a renamed or unregistered metric fails
// the test that reads it instead of making a "no halts" check pass.
package promtest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/metrics"
)

// ErrMissing is returned when the exposition has no such series.
var ErrMissing = errors.New("promtest: series not exported")

// Lookup returns the value of series (the metric name with its rendered
// labels, as `strand_epoch_halts_total{class="express"}`) in exposition.
func Lookup(exposition, series string) (float64, error) {
	for _, line := range strings.Split(exposition, "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, fmt.Errorf("promtest: series %s has no value: %q", series, line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("promtest: series %s: value %q: %w", series, f[0], err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("%w: %s", ErrMissing, series)
}

// Render returns the exposition of r.
func Render(r *metrics.Registry) string {
	var sb strings.Builder
	r.Write(&sb)
	return sb.String()
}

// Value returns series from r, failing tb when it is not exported.
func Value(tb testing.TB, r *metrics.Registry, series string) float64 {
	tb.Helper()
	v, err := Lookup(Render(r), series)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}
