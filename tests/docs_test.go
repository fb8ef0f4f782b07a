package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strandlog/strand/tests/testproc"
)

// docStep is one command of a doc's runnable section: the line as written
// (without its trailing comment), whether the comment says it fails, and
// the "# prints:" lines that follow it.
type docStep struct {
	line   string
	fails  string // the comment after "# fails:", "" when it must succeed
	prints []string
}

// docSteps returns the commands of the ```sh blocks in the section of doc
// headed by heading.
func docSteps(t *testing.T, doc, heading string) []docStep {
	t.Helper()
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("no %q section", heading)
	}
	section := doc[start+1:]
	if end := strings.Index(section[len(heading):], "\n## "); end >= 0 {
		section = section[:end+len(heading)]
	}
	fails := regexp.MustCompile(`\s+#\s+fails:?\s*(.*)$`)
	var steps []docStep
	in := false
	for _, l := range strings.Split(section, "\n") {
		switch {
		case l == "```sh":
			in = true
		case l == "```":
			in = false
		case !in || strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "# prints: "):
			if len(steps) == 0 {
				t.Fatalf("%q before any command", l)
			}
			steps[len(steps)-1].prints = append(steps[len(steps)-1].prints, strings.TrimPrefix(l, "# prints: "))
		case strings.HasPrefix(l, "#"):
		default:
			s := docStep{line: l}
			if m := fails.FindStringSubmatchIndex(l); m != nil {
				s.line, s.fails = l[:m[0]], l[m[2]:m[3]]
				if s.fails == "" {
					s.fails = "fails"
				}
			}
			steps = append(steps, s)
		}
	}
	if len(steps) == 0 {
		t.Fatalf("the %q section has no commands", heading)
	}
	return steps
}

// TestCLIDocTour runs every command of docs/cli.md's "A tour", in order, in
// bash, with a strand binary first on PATH, against a strand dev: a
// command commented "# fails" must fail, every other must succeed, and
// each "# prints:" line must appear in what the command before it printed.
// The doc's examples are executed, as README's are by TestReadmeWalkthrough
// (issue 34).
func TestCLIDocTour(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and bash is not installed: %v", err)
		}
		t.Skipf("bash is not installed: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(testproc.RepoRoot(t), "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := docSteps(t, string(doc), "## A tour")
	bin := testproc.Build(t, "./cmd/strand")
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "strand")); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	addr := testproc.FreeAddr(t)
	startReadmeDev(t, bin, root, addr)
	token, err := os.ReadFile(filepath.Join(root, "strand-data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRAND_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"STRAND_ENDPOINT=http://"+addr, "STRAND_TOKEN="+strings.TrimSpace(string(token)))
	for _, s := range steps {
		cmd := exec.Command("bash", "-o", "pipefail", "-c", s.line)
		cmd.Dir, cmd.Env = root, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		switch {
		case s.fails == "" && err != nil:
			t.Fatalf("cli.md: %q: %v\n%s", s.line, err, out.String())
		case s.fails != "" && err == nil:
			t.Fatalf("cli.md: %q succeeded; its comment says it fails (%s):\n%s", s.line, s.fails, out.String())
		}
		for _, p := range s.prints {
			if !strings.Contains(out.String(), p) {
				t.Fatalf("cli.md: %q printed\n%s\nwithout %q", s.line, out.String(), p)
			}
		}
	}
}
