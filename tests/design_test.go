package tests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strandlog/strand/tests/testproc"
)

// design014Lines is design 014's bound: short enough to review in one
// sitting (issue 30); its history goes to ADR 0059.
const design014Lines = 400

// repoText returns the text of every .go and .md file of the repository
// (by path relative to root), but for the directories no source lives in.
func repoText(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "cdk.out":
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".md" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// designChecks returns what design doc names as checks: the tests, fuzz
// tests and benchmarks in backquotes (a subtest as Name/sub), the
// simulation checkers (`checkX`) and the mutants (mutant `name`).
func designChecks(doc string) (tests, checkers, mutants []string) {
	seen := map[string]bool{}
	add := func(list *[]string, s string) {
		if !seen[s] {
			seen[s] = true
			*list = append(*list, s)
		}
	}
	for _, m := range regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*(?:/[A-Za-z0-9_-]+)?)`").FindAllStringSubmatch(doc, -1) {
		add(&tests, m[1])
	}
	for _, m := range regexp.MustCompile("`(check[A-Z][A-Za-z0-9]*)`").FindAllStringSubmatch(doc, -1) {
		add(&checkers, m[1])
	}
	for _, m := range regexp.MustCompile("mutants?\\s+`([a-z0-9-]+)`").FindAllStringSubmatch(doc, -1) {
		add(&mutants, m[1])
	}
	return tests, checkers, mutants
}

// designHeadings returns the titles of doc's headings.
func designHeadings(doc string) []string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "#") {
			out = append(out, strings.TrimSpace(strings.TrimLeft(l, "#")))
		}
	}
	return out
}

// designCitations returns the section names the repository's comments
// and docs cite in design 014 (design 014, "Name"; [design 014](...),
// "Name"), each with the file citing it. Comment markers and line breaks
// inside a citation are folded to one space.
func designCitations(files map[string]string) map[string][]string {
	fold := regexp.MustCompile(`\s*\n\s*(?://\s*)?`)
	cite := regexp.MustCompile(`(?:design 014|\[design 014\]\([^)]*\)),?\s*"([^"]+)"`)
	out := map[string][]string{}
	for path, text := range files {
		if path == "docs/design/014-pass-index.md" || path == "tests/design_test.go" {
			continue
		}
		for _, m := range cite.FindAllStringSubmatch(fold.ReplaceAllString(text, " "), -1) {
			out[m[1]] = append(out[m[1]], path)
		}
	}
	return out
}

// TestDesign014 holds design 014 (the pass index) to what issue 30 asked
// of it: under 400 lines; every test, fuzz test, benchmark, simulation
// checker and mutant it names as a check exists in the tree (a func of
// that name in a _test.go file, a subtest's name in a Go file, a mutant
// in tests/mutants/mutants.sh); and every section the code and docs cite
// ("design 014, "Name"") is a heading of it, so a rewrite cannot strand
// a citation. It failed before the rewrite (1,440 lines).
func TestDesign014(t *testing.T) {
	root := testproc.RepoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "design", "014-pass-index.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if n := strings.Count(doc, "\n"); n >= design014Lines {
		t.Errorf("design 014 has %d lines; keep it under %d (history goes to ADR 0059)", n, design014Lines)
	}
	files := repoText(t, root)
	var testSrc, goSrc strings.Builder
	for path, text := range files {
		if strings.HasSuffix(path, ".go") {
			goSrc.WriteString(text)
			if strings.HasSuffix(path, "_test.go") {
				testSrc.WriteString(text)
			}
		}
	}
	tests, checkers, mutants := designChecks(doc)
	if len(tests) < 20 || len(checkers) == 0 || len(mutants) == 0 {
		t.Fatalf("design 014 names %d tests, %d checkers and %d mutants: its invariants must name their checks", len(tests), len(checkers), len(mutants))
	}
	for _, name := range tests {
		fn, sub, _ := strings.Cut(name, "/")
		if !regexp.MustCompile(`func ` + fn + `\(`).MatchString(testSrc.String()) {
			t.Errorf("design 014 names %s: no func %s in any _test.go file", name, fn)
		}
		if sub != "" && !strings.Contains(goSrc.String(), `"`+sub+`"`) {
			t.Errorf("design 014 names %s: no subtest %q in any Go file", name, sub)
		}
	}
	for _, name := range checkers {
		if !regexp.MustCompile(`func (?:\([^)]*\) )?` + name + `\(`).MatchString(testSrc.String()) {
			t.Errorf("design 014 names the checker %s: no such func in any _test.go file", name)
		}
	}
	script, err := os.ReadFile(filepath.Join(root, "tests", "mutants", "mutants.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range mutants {
		if !regexp.MustCompile(`(?m)^mutant ` + regexp.QuoteMeta(name) + ` `).Match(script) {
			t.Errorf("design 014 names the mutant %s: not in tests/mutants/mutants.sh", name)
		}
	}
	headings := designHeadings(doc)
	cited := designCitations(files)
	if len(cited) < 5 {
		t.Fatalf("%d sections of design 014 cited: the pattern is broken (there are more)", len(cited))
	}
	for name, paths := range cited {
		found := false
		for _, h := range headings {
			found = found || strings.HasPrefix(h, name)
		}
		if !found {
			t.Errorf("%s cite design 014, %q: no such heading", strings.Join(paths, ", "), name)
		}
	}
}
