package main

import (
	"strings"
	"testing"
)

// TestAppendLinesUpToTheRecordLimit: the CLI appends a line of exactly
// 1 MiB (the documented record limit) and refuses a longer one by its
// line number. Issue 20 item 5: a line over 983,039 bytes failed with
// "bufio.Scanner: token too long", and a body over 1,048,562 bytes was
// refused by the server.
func TestAppendLinesUpToTheRecordLimit(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "big")
	mib := strings.Repeat("x", 1<<20)
	r := strand(t, env, "small\n"+mib+"\r\n"+mib, "append", "big")
	if r.code != 0 || !strings.Contains(r.stdout, "appended 3 records") {
		t.Fatalf("append of two 1 MiB lines: %+v", r.stderr)
	}
	r = strand(t, env, "", "read", "big")
	if r.code != 0 || r.stdout != "small\n"+mib+"\n"+mib+"\n" {
		t.Fatalf("read back %d bytes, %q", len(r.stdout), r.stderr)
	}
	r = strand(t, env, "ok\n"+mib+"y\n", "append", "big")
	if r.code == 0 || !strings.Contains(r.stderr, "line 2 is longer than 1048576 bytes") {
		t.Fatalf("append of a line over 1 MiB: %d %q", r.code, r.stderr)
	}
}
