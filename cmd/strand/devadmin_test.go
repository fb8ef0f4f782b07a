package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDevServesMetrics: strand dev prints where its metrics are, and
// serves the star's series and the Go runtime's there.
func TestDevServesMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, devFlags{dataDir: t.TempDir(), addr: "127.0.0.1:0", adminAddr: "127.0.0.1:0", starID: "star-0", logLevel: "error"}, &out)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	re := regexp.MustCompile(`Metrics: (http://\S+/metrics) `)
	var m []string
	for deadline := time.Now().Add(15 * time.Second); m == nil; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("strand dev ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strand dev did not print where its metrics are: %q", out.String())
		}
		m = re.FindStringSubmatch(out.String())
	}
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
