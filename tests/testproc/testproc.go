// Package testproc is test support for the tests that run strand's binaries
// as processes (tests/e2e, tests/integration): find the repository, build a
// main package, pick a free loopback address; and, for restart tests, the
// client load (Producer, Reader) that resumes after unavailable and records
// what it saw (Observed, load.go).
package testproc

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RepoRoot is the directory of the go.mod above the working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// Build builds the main package pkg (e.g. "./cmd/strand") into a temporary
// directory and returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// FreeAddr returns a loopback address that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
