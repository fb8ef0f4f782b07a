package main

import (
	"strings"
	"testing"
)

// TestRebalanceThroughTheBinary: strand rebalance against one strand dev
// star: balanced with that star alone; with a second star listed it plans
// half the streams onto it, and --apply reports each move refused (the
// dev star does not know star-1) and exits non-zero, moving nothing.
func TestRebalanceThroughTheBinary(t *testing.T) {
	d := startDev(t)
	env := d.env()
	for _, name := range []string{"a", "b", "c", "d"} {
		mustStrand(t, env, "", "create", name)
	}
	if out := mustStrand(t, env, "", "rebalance", "--stars", "star-0").stdout; !strings.Contains(out, "balanced: 4 streams over 1 stars") {
		t.Fatalf("rebalance over the one star printed %q", out)
	}
	out := mustStrand(t, env, "", "rebalance", "--stars", "star-0,star-1").stdout
	if want := "move c star-0 -> star-1\nmove d star-0 -> star-1\n2 of 4 streams to move"; !strings.Contains(out, want) {
		t.Fatalf("plan %q, want %q", out, want)
	}
	r := strand(t, env, "", "rebalance", "--stars", "star-0,star-1", "--apply", "--retry-for", "0")
	if r.code == 0 || !strings.Contains(r.stdout, `refused c star-0 -> star-1`) || !strings.Contains(r.stdout, `unknown star "star-1"`) || !strings.Contains(r.stderr, "2 of 2 moves refused") {
		t.Fatalf("rebalance --apply: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if out := mustStrand(t, env, "", "rebalance", "--stars", "star-0,star-1").stdout; !strings.Contains(out, "2 of 4 streams to move") {
		t.Fatalf("plan after the refused apply %q: want the same plan", out)
	}
}
