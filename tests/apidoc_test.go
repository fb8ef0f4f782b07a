package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strandlog/strand/tests/testproc"
)

// apiDocCellMax is the longest cell docs/api.md's tables may hold: the
// details go below the table (issue 34: cells of over 1,000 characters).
const apiDocCellMax = 200

// TestAPIDocHeadsEveryCall holds docs/api.md to issue 34: every rpc of
// strand.v1.StrandService (read from the .proto, so a new call without a
// section fails) has a "### Name" heading under "## Calls" and a row in
// its table linking to it, and no table cell is longer than
// apiDocCellMax. It failed before the Calls section was rewritten (no
// headings, a cell of 384 characters).
func TestAPIDocHeadsEveryCall(t *testing.T) {
	root := testproc.RepoRoot(t)
	proto, err := os.ReadFile(filepath.Join(root, "proto", "strand", "v1", "strand.proto"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Calls\n")
	if start < 0 {
		t.Fatal("docs/api.md has no ## Calls section")
	}
	calls := doc[start+1:]
	if end := strings.Index(calls[len("## Calls\n"):], "\n## "); end >= 0 {
		calls = calls[:len("## Calls\n")+end]
	}
	rpcs := regexp.MustCompile(`(?m)^\s*rpc (\w+)\(`).FindAllStringSubmatch(string(proto), -1)
	if len(rpcs) < 10 {
		t.Fatalf("found %d rpcs in strand.proto; the pattern is broken", len(rpcs))
	}
	anchors := mdAnchors(calls)
	for _, m := range rpcs {
		name := m[1]
		if !strings.Contains(calls, "\n### "+name+"\n") {
			t.Errorf("docs/api.md, Calls: no ### %s heading", name)
		}
		row := regexp.MustCompile(`(?m)^\| \[` + name + `\]\(#([a-z0-9-]+)\) \|`).FindStringSubmatch(calls)
		if row == nil {
			t.Errorf("docs/api.md, Calls: no table row linking %s", name)
		} else if !anchors[row[1]] || row[1] != strings.ToLower(name) {
			t.Errorf("docs/api.md, Calls: %s's row links #%s, not its heading", name, row[1])
		}
	}
	for i, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		for _, cell := range strings.Split(strings.Trim(l, "|"), " | ") {
			if n := len([]rune(strings.TrimSpace(cell))); n > apiDocCellMax {
				t.Errorf("docs/api.md:%d: a table cell of %d characters (at most %d): %.60q...", i+1, n, apiDocCellMax, cell)
			}
		}
	}
}
