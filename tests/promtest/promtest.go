// Package promtest reads series from a Prometheus text exposition (what
// metrics.Registry.Write renders) in tests. A series that is not in the
// exposition is an error, never 0: a renamed or unregistered metric fails
// the test that reads it instead of making a "no halts" check pass.
package promtest

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/metrics"
)

// ErrMissing is returned when the exposition has no such series.
var ErrMissing = errors.New("promtest: series not exported")

// Lookup returns the value of series (the metric name with its rendered
// labels, as `strand_epoch_halts_total{class="express"}`) in exposition.
// Labels match in any order: client_golang renders them sorted by name.
func Lookup(exposition, series string) (float64, error) {
	want, _, ok := canonical(series)
	if !ok {
		return 0, fmt.Errorf("promtest: malformed series %q", series)
	}
	for _, line := range strings.Split(exposition, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		got, rest, ok := canonical(line)
		if !ok || got != want {
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

// canonical splits s (name{labels} value..., or name value...) into its
// series with the labels sorted by name, and the rest of the line.
func canonical(s string) (series, rest string, ok bool) {
	i := strings.IndexAny(s, "{ ")
	if i < 0 {
		return s, "", s != ""
	}
	name := s[:i]
	if s[i] == ' ' {
		return name, s[i:], name != ""
	}
	var labels []string
	j := i + 1
	for {
		if j < len(s) && s[j] == '}' {
			j++
			break
		}
		eq := strings.Index(s[j:], "=\"")
		if eq < 0 {
			return "", "", false
		}
		k := j + eq + 2
		for k < len(s) && s[k] != '"' {
			if s[k] == '\\' {
				k++
			}
			k++
		}
		if k >= len(s) {
			return "", "", false
		}
		labels = append(labels, s[j:k+1])
		j = k + 1
		if j < len(s) && s[j] == ',' {
			j++
		}
	}
	sort.Strings(labels)
	return name + "{" + strings.Join(labels, ",") + "}", s[j:], true
}

// Render returns the exposition of r.
func Render(r *metrics.Registry) string {
	var sb strings.Builder
	_ = r.Write(&sb) // a collector's error leaves its series out: Lookup reports them missing
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
