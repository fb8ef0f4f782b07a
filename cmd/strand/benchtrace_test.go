package main

import (
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
