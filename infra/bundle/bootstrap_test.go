package bundle

import (
	"errors"
	"os"
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
