package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlog/strand/tests/testproc"
)

// quickRepo makes a git repository in a temporary directory holding
// .ci/quick.sh and a one-package Go module (./a) committed on main, and
// returns its path and a function that runs a command in a directory.
func quickRepo(t *testing.T) (string, func(dir string, args ...string) (string, error)) {
	t.Helper()
	for _, tool := range []string{"bash", "git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true and %s is not installed: %v", tool, err)
			}
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	script, err := os.ReadFile(filepath.Join(testproc.RepoRoot(t), ".ci", "quick.sh"))
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "repo")
	files := map[string]string{
		".ci/quick.sh": string(script),
		"go.mod":       "module example.com/q\n\ngo 1.26\n",
		"a/a.go":       "package a\n\n// A is one.\nfunc A() int { return 1 }\n",
	}
	for name, body := range files {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GOFLAGS=-buildvcs=false")
	run := func(dir string, args ...string) (string, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, c := range [][]string{{"git", "init", "-q", "-b", "main"}, {"git", "add", "."}, {"git", "commit", "-qm", "one"}} {
		if out, err := run(repo, c...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	return repo, run
}

// TestMakeQuick: `make quick` (.ci/quick.sh) with nothing changed says so
// and succeeds, and in a clone without a local main (a clone of a branch)
// it compares with origin/main, so a committed change is checked; a
// changed package since deleted is skipped. Before, the first and the
// last exited 1 without a word (grep matching nothing, and the loop's
// last test, failed the pipeline under pipefail) and the second checked
// nothing (git diff main... failed, silenced).
func TestMakeQuick(t *testing.T) {
	repo, run := quickRepo(t)
	out, err := run(repo, "bash", ".ci/quick.sh")
	if err != nil || !strings.Contains(out, "no Go package changed since main") {
		t.Fatalf("quick with nothing changed: %v\n%s", err, out)
	}

	for _, c := range [][]string{{"git", "checkout", "-qb", "feature"}, {"bash", "-c", `printf '\n// B is two.\nfunc B() int { return 2 }\n' >> a/a.go`},
		{"git", "commit", "-qam", "two"}} {
		if out, err := run(repo, c...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	clone := filepath.Join(filepath.Dir(repo), "clone")
	if out, err := run(filepath.Dir(repo), "git", "clone", "-q", "--branch", "feature", repo, clone); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	if _, err := run(clone, "git", "rev-parse", "-q", "--verify", "main"); err == nil {
		t.Fatal("the clone has a local main; the test needs one without")
	}
	out, err = run(clone, "bash", ".ci/quick.sh")
	if err != nil || !strings.Contains(out, "== quick: ./a") {
		t.Fatalf("quick in a clone without a local main, ./a changed since origin/main: %v\n%s", err, out)
	}

	// A package deleted (the last path in sort order) is no package to
	// check, and not a failure.
	if out, err := run(clone, "git", "rm", "-rq", "a"); err != nil {
		t.Fatalf("git rm: %v\n%s", err, out)
	}
	out, err = run(clone, "bash", ".ci/quick.sh")
	if err != nil || !strings.Contains(out, "no Go package changed") {
		t.Fatalf("quick with the changed package deleted: %v\n%s", err, out)
	}

	// A base that names nothing is refused, saying what to set.
	out, err = run(clone, "env", "QUICK_BASE=nosuch", "bash", ".ci/quick.sh")
	if err == nil || !strings.Contains(out, "QUICK_BASE") {
		t.Fatalf("quick with QUICK_BASE=nosuch: %v\n%s", err, out)
	}
}
