package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `strand bench --trace` writes an execution trace of the write window
// that go tool trace reads, and the report says how long goroutines waited
// for a processor in it.
func TestBenchTrace(t *testing.T) {
	f := filepath.Join(t.TempDir(), "window.trace")
	out, errOut, err := run(t, "bench", "--duration", "300ms", "--warmup", "100ms", "--baseline=false",
		"--rate", "1", "--streams", "2", "--producers", "1", "--trace", f)
	if err != nil {
		t.Fatalf("bench --trace: %v\n%s\n%s", err, out, errOut)
	}
	if !strings.Contains(out, "waits for a processor") {
		t.Fatalf("the report has no waits for a processor:\n%s", out)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	// A Go execution trace opens with its version header ("go 1.26 trace").
	if !strings.HasPrefix(string(b), "go 1.") || !strings.Contains(string(b[:min(len(b), 16)]), " trace") || len(b) < 4096 {
		t.Fatalf("not an execution trace: %d bytes starting %q", len(b), b[:min(len(b), 16)])
	}
}

// A run with no write window in this process (a catch-up read) says --trace traced
// nothing, rather than leave an empty file unexplained; a trace that
// cannot start is said, and its window not stopped.
func TestBenchTraceNothingTraced(t *testing.T) {
	f := filepath.Join(t.TempDir(), "window.trace")
	out, errOut, err := run(t, "bench", "--workload", "catchup", "--backlog-mb", "4", "--duration", "300ms", "--baseline=false",
		"--streams", "2", "--producers", "1", "--trace", f)
	if err != nil {
		t.Fatalf("bench --workload catchup --trace: %v\n%s\n%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "--trace: no write window ran in this process") {
		t.Fatalf("stderr does not say nothing was traced:\n%s", errOut)
	}

	var said strings.Builder
	cmd := newRoot()
	cmd.SetErr(&said)
	stopped := false
	w := &window{cmd: cmd, flag: "--trace", start: func() error { return errors.New("tracing is already enabled") }, stop: func() { stopped = true }}
	w.hook(true)
	w.hook(false)
	if !w.started || w.active || stopped || !strings.Contains(said.String(), "strand bench: --trace: tracing is already enabled") {
		t.Fatalf("a failed start: started %v active %v stopped %v, said %q", w.started, w.active, stopped, said.String())
	}
}
