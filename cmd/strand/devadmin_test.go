package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestDevServesMetrics: strand dev prints where its metrics are, and
// serves the star's series and the Go runtime's there.
func TestDevServesMetrics(t *testing.T) {
	m := runDevUntil(t, `Metrics: (http://\S+/metrics) `, func(ctx context.Context, out io.Writer) error {
		return runDev(ctx, devFlags{dataDir: t.TempDir(), addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0", starID: "star-0", logLevel: "error"}, out)
	})
	res, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", m[1], res.Status)
	}
	for _, want := range []string{"\nstrand_appends_total{class=\"express\"} ", "\nstrand_sessions_open{procedure=\"ReadSession\"} 0\n", "\ngo_goroutines "} {
		if !strings.Contains("\n"+string(body), want) {
			t.Errorf("%s has no %q", m[1], want)
		}
	}
}

// TestDevAdminFallback: the default admin address falls back at bind time
// (two strand dev processes starting at once both found 4781 free and one
// failed with "address already in use": TestAppendHeadersTimestampsJSON
// under load); a given one never does.
func TestDevAdminFallback(t *testing.T) {
	if got := devAdminFallback(devAdminAddr, false); got != "127.0.0.1:0" {
		t.Errorf("default: fallback %q, want a free loopback port", got)
	}
	if got := devAdminFallback("127.0.0.1:9999", true); got != "" {
		t.Errorf("given: fallback %q, want none", got)
	}
	if got := devAdminFallback("", false); got != "" {
		t.Errorf("off: fallback %q, want none", got)
	}
}
