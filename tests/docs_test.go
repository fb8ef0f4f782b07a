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

// docDev builds strand, starts a strand dev in a temporary root, and
// returns the binary, the root, the address and an environment whose
// STRAND_ENDPOINT and STRAND_TOKEN are the dev's (PATH is the caller's to
// add).
func docDev(t *testing.T) (bin, root, addr string, env []string) {
	t.Helper()
	bin = testproc.Build(t, "./cmd/strand")
	root = t.TempDir()
	addr = testproc.FreeAddr(t)
	startReadmeDev(t, bin, root, addr)
	token, err := os.ReadFile(filepath.Join(root, "strand-data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRAND_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "STRAND_ENDPOINT=http://"+addr, "STRAND_TOKEN="+strings.TrimSpace(string(token)))
	return bin, root, addr, env
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
	bin, root, _, env := docDev(t)
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "strand")); err != nil {
		t.Fatal(err)
	}
	env = append(env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
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

// apiExample is one command of an api.md ```sh block (continuation lines
// joined), the assignments before it in its block, and the "# ..." lines
// after it: what it prints.
type apiExample struct {
	prelude []string
	line    string
	outputs []string
}

// apiExamples returns every command of every ```sh block of doc.
func apiExamples(doc string) []apiExample {
	var out []apiExample
	assign := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	var prelude []string
	in, cur := false, ""
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case l == "```sh":
			in, prelude = true, nil
		case l == "```":
			in = false
		case !in:
		case strings.HasPrefix(l, "# "):
			if len(out) > 0 {
				out[len(out)-1].outputs = append(out[len(out)-1].outputs, strings.TrimPrefix(l, "# "))
			}
		case strings.HasSuffix(l, `\`):
			cur += strings.TrimSuffix(l, `\`)
		default:
			cur += l
			if assign.MatchString(cur) {
				prelude = append(prelude, cur)
			} else if strings.TrimSpace(cur) != "" {
				out = append(out, apiExample{prelude: append([]string(nil), prelude...), line: cur})
			}
			cur = ""
		}
	}
	return out
}

// jsonPair matches "key":value in an expected output line: a string or a
// number.
var jsonPair = regexp.MustCompile(`"(\w+)":\s*("[^"]*"|-?\d+)`)

// checkOutput checks what an api.md command printed against the "# ..."
// line after it: a JSON line's string and number fields must be there
// with their values (only the key where the doc elides the value with
// "...", or for a timestamp, whose value is the clock's); a plain line
// must appear as written.
func checkOutput(t *testing.T, line, got, want string) {
	t.Helper()
	flat := strings.Join(strings.Fields(got), "")
	if !strings.HasPrefix(want, "{") {
		if !strings.Contains(got, want) {
			t.Errorf("api.md: %q printed %q, the doc says %q", line, got, want)
		}
		return
	}
	for _, m := range jsonPair.FindAllStringSubmatch(want, -1) {
		key, val := m[1], m[2]
		pair := `"` + key + `":` + val
		if strings.Contains(val, "...") || strings.HasSuffix(key, "Ms") {
			pair = `"` + key + `":`
		}
		if !strings.Contains(flat, strings.Join(strings.Fields(pair), "")) {
			t.Errorf("api.md: %q printed %q, the doc says %s", line, got, pair)
		}
	}
}

// TestAPIDocExamples runs every curl (and, where installed, grpcurl; in
// CI it must be) example of docs/api.md in order against a strand dev whose streams are
// in the state the doc assumes (hello after the README walkthrough's first
// five records, orders with 41 records), and checks what each prints
// against the doc's "# ..." line after it (issue 34: api.md showed
// SERVING_STATUS_SERVING where grpcurl prints SERVING).
func TestAPIDocExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true and %s is not installed: %v", tool, err)
			}
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	_, grpcErr := exec.LookPath("grpcurl")
	if grpcErr != nil && os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and grpcurl is not installed (.ci/run installs it): %v", grpcErr)
	}
	doc, err := os.ReadFile(filepath.Join(testproc.RepoRoot(t), "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples := apiExamples(string(doc))
	bin, _, addr, env := docDev(t)
	env = append(env, "PATH="+os.Getenv("PATH"))
	cli := func(stdin string, args ...string) {
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Stdin = env, strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("strand %v: %v: %s", args, err, out)
		}
	}
	cli("", "create", "hello")
	cli("first\nsecond\nthird\nfourth\nfifth\n", "append", "hello")
	cli("", "create", "orders")
	cli(strings.Repeat("x\n", 41), "append", "orders")

	ran := 0
	for _, ex := range examples {
		if strings.HasPrefix(ex.line, "grpcurl") && grpcErr != nil {
			t.Logf("grpcurl is not installed: skipped %q", ex.line)
			continue
		}
		if !strings.HasPrefix(ex.line, "curl") && !strings.HasPrefix(ex.line, "grpcurl") {
			t.Fatalf("api.md: %q: this test runs curl and grpcurl examples only", ex.line)
		}
		script := strings.ReplaceAll(strings.Join(append(ex.prelude, ex.line), "\n"), "127.0.0.1:4780", addr)
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("api.md: %q: %v\n%s", ex.line, err, out)
		}
		for _, want := range ex.outputs {
			checkOutput(t, ex.line, string(out), want)
		}
		ran++
	}
	if ran < 10 {
		t.Fatalf("ran %d api.md examples; the doc has more", ran)
	}
}
