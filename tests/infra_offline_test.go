package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInfraDepsOfflineHint: `make -C infra deps` (and so synth) without a
// reachable npm registry says what failed and what to do, not only npm's
// raw EAI_AGAIN (issue 34). It runs the real Makefile in a copy of infra/
// with the registry pointed at a closed port.
func TestInfraDepsOfflineHint(t *testing.T) {
	for _, tool := range []string{"make", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI: %v", tool, err)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	dir := filepath.Join(t.TempDir(), "infra")
	if err := os.MkdirAll(filepath.Join(dir, "_cdk"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Makefile", "_cdk/package.json", "_cdk/package-lock.json"} {
		b, err := os.ReadFile(filepath.Join("..", "infra", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("make", "-C", dir, "deps")
	cmd.Env = append(os.Environ(), "npm_config_registry=http://127.0.0.1:9/", "npm_config_fetch_retries=0", "npm_config_offline=false")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make deps against a closed registry succeeded: %s", out)
	}
	for _, want := range []string{"infra: npm ci failed", "hint:", "http://127.0.0.1:9/", "make -C infra deps"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
