package main

import (
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/client"
)

// TestReadTotal: the progress bar's total from the tail, the trim point
// and the start.
func TestReadTotal(t *testing.T) {
	st := client.State{Tail: client.Tail{NextSeq: 100}, TrimSeq: 10}
	for _, tc := range []struct {
		sf   startFlags
		want int64
	}{
		{startFlags{}, 90},
		{startFlags{seq: "5"}, 90},
		{startFlags{seq: "40"}, 60},
		{startFlags{seq: "500"}, 0},
		{startFlags{tailOffset: "7"}, 7},
		{startFlags{tailOffset: "1000"}, 90},
		{startFlags{timestamp: "5"}, -1},
	} {
		if got := readTotal(st, tc.sf); got != tc.want {
			t.Errorf("%+v: %d, want %d", tc.sf, got, tc.want)
		}
	}
}

// TestReadProgress: read shows a progress bar in records on stderr, and
// stdout holds the records alone. Issue 34: only append had one.
func TestReadProgress(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "p")
	mustStrand(t, env, "a\nb\nc\nd\n", "append", "p")
	r := mustStrand(t, env, "", "read", "p", "--seq", "1", "--progress", "on")
	if r.stdout != "b\nc\nd\n" || !strings.Contains(r.stderr, "reading") || !strings.Contains(r.stderr, "(3/3") {
		t.Fatalf("read --progress on: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if r := mustStrand(t, env, "", "read", "p"); r.stderr != "" {
		t.Fatalf("read without a terminal showed %q on stderr", r.stderr)
	}
	for _, cmd := range []string{"read", "append"} {
		if r := strand(t, env, "x\n", cmd, "p", "--progress", "sometimes"); r.code == 0 || !strings.Contains(r.stderr, "want auto, on or off") {
			t.Fatalf("%s --progress sometimes: %+v", cmd, r)
		}
	}
}
