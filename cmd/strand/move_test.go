package main

import (
	"strings"
	"testing"
)

// TestMoveRefusalsThroughTheBinary: strand move as a user runs it against
// one strand dev star: without --to, to an unknown star, of a missing
// stream and to the stream's own leader, each refused with what is wrong,
// and the stream still appends where it was. (The move itself needs two
// stars: server.TestMoveStreamUnderLoad.)
func TestMoveRefusalsThroughTheBinary(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "orders")
	mustStrand(t, env, "a\n", "append", "orders")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"move", "orders"}, "--to STAR is required"},
		{[]string{"move", "orders", "--to", "star-9"}, `unknown star "star-9" (known: star-0)`},
		{[]string{"move", "missing", "--to", "star-0"}, `stream "missing" does not exist`},
		{[]string{"move", "orders", "--to", "star-0"}, `stream "orders" is led by star-0 already`},
	} {
		r := strand(t, env, "", append(c.args, "--retry-for", "0")...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Fatalf("strand %s: exit %d, stderr %q, want %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	out := mustStrand(t, env, "b\n", "append", "orders").stdout
	if !strings.Contains(out, "(seqs 1..1)") {
		t.Fatalf("append after refused moves printed %q", out)
	}
}
