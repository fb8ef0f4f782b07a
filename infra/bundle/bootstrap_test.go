package bundle

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tempRepo lays out a repository root with a go.mod and the given files.
func tempRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files["go.mod"] = "module example.com/r\n\ngo 1.22\n"
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestBootstrapBuildsArm64(t *testing.T) {
	root := tempRepo(t, map[string]string{
		"functions/hello/main.go": "package main\n\nfunc main() { println(\"hello\") }\n",
	})
	// A stale placeholder from an older layout must not survive.
	if err := os.MkdirAll(Dir(root, "hello"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(Dir(root, "hello"), "README"), []byte("placeholder"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := Bootstrap(root, "hello")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "bootstrap" {
		t.Fatalf("%s holds %v, want only bootstrap", dir, ents)
	}
	if err := CheckELF(filepath.Join(dir, "bootstrap")); err != nil {
		t.Fatal(err)
	}
}

func TestBootstrapRefuses(t *testing.T) {
	root := tempRepo(t, map[string]string{
		"functions/lib/lib.go":     "package lib\n\nfunc F() {}\n",
		"functions/broken/main.go": "package main\n\nfunc main() { undefined() }\n",
	})
	for _, name := range []string{"lib", "broken", "missing"} {
		if _, err := Bootstrap(root, name); err == nil {
			t.Errorf("functions/%s: built a bootstrap", name)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("functions/%s: error does not name it: %v", name, err)
		}
		if err := CheckELF(filepath.Join(Dir(root, name), "bootstrap")); err == nil {
			t.Errorf("functions/%s: a bootstrap was left behind", name)
		}
	}
}

func TestCheckELFRefuses(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "README")
	if err := os.WriteFile(text, []byte("placeholder\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{"text file": text, "missing file": filepath.Join(dir, "nothing")}
	if runtime.GOARCH != "arm64" {
		// This test binary: an ELF of the host's architecture.
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cases["host binary"] = exe
	}
	for what, p := range cases {
		if err := CheckELF(p); !errors.Is(err, ErrNotArm64) {
			t.Errorf("%s: CheckELF = %v, want ErrNotArm64", what, err)
		}
	}
}

// git runs git in dir with a fixed identity.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestBootstrapReproducible: a bootstrap built in a git checkout carries
// no VCS stamp, so a docs-only commit rebuilds it byte for byte (and its
// asset hash, a hash of the one file, stays). GOFLAGS is Go's default
// here (-buildvcs=auto): CI sets -buildvcs=false, which hid the stamp (vcs.revision, vcs.time,
// vcs.modified) a developer's `cdk deploy` embedded, so every commit
// redeployed every function. Failed before LambdaBuildFlags had
// -buildvcs=false.
func TestBootstrapReproducible(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no git on PATH (CI clones with it)")
		}
		t.Skip("no git on PATH")
	}
	t.Setenv("GOFLAGS", "-buildvcs=auto") // overrides the go env file too
	root := tempRepo(t, map[string]string{
		"functions/hello/main.go": "package main\n\nfunc main() { println(\"hello\") }\n",
		"docs/a.md":               "a\n",
	})
	git(t, root, "init", "-q")
	git(t, root, "add", "-A")
	git(t, root, "commit", "-qm", "one")
	build := func() []byte {
		t.Helper()
		if err := buildBootstrap(root, "hello", Dir(root, "hello")); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(Dir(root, "hello"), "bootstrap"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := build()
	if err := os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, root, "commit", "-qam", "docs only")
	if second := build(); !bytes.Equal(first, second) {
		v, _ := exec.Command(GoTool(), "version", "-m", filepath.Join(Dir(root, "hello"), "bootstrap")).CombinedOutput()
		t.Errorf("the bootstrap changed after a docs-only commit (%d -> %d bytes); build info:\n%s", len(first), len(second), v)
	}
}
