package main

import (
	"strings"
	"testing"
)

// TestRmThenCreateThroughTheBinary (issue 30): `strand rm x && strand
// create x` in strand dev succeeds at once; the new x is a new, empty
// stream (its first record is seq 0, and none of the old records reads
// back). Before, the create was refused ("being deleted") until trim had
// removed the old stream, up to about a day with the pass index.
func TestRmThenCreateThroughTheBinary(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "events")
	mustStrand(t, env, "a\nb\n", "append", "events")
	mustStrand(t, env, "", "rm", "events")
	if r := strand(t, env, "", "create", "events"); r.code != 0 {
		t.Fatalf("create right after rm: exit %d, stderr %q", r.code, r.stderr)
	}
	mustStrand(t, env, "c\n", "append", "events")
	if got := mustStrand(t, env, "", "read", "events").stdout; got != "c\n" {
		t.Fatalf("read of the new stream: %q, want only its own record", got)
	}
	js := mustStrand(t, env, "", "read", "events", "--format", "json").stdout
	if !strings.Contains(js, `"seqNum":0`) {
		t.Fatalf("the new stream's first record is not seq 0: %q", js)
	}
}
