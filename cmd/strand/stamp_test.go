package main

import (
	"strings"
	"testing"
)

// TestCreateTimestamping: strand create --timestamping and --uncapped set
// the stream's policy, and the CLI shows it; a client-require stream
// refuses the CLI's lines, which carry no timestamp. Issue 20 item 1.
func TestCreateTimestamping(t *testing.T) {
	d := startDev(t)
	env := d.env()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"create", "plain"}, "timestamps client-prefer, capped)"},
		{[]string{"create", "arrive", "--timestamping", "arrival", "--uncapped"}, "timestamps arrival, uncapped)"},
		{[]string{"create", "sensors", "--timestamping", "client-require"}, "timestamps client-require, capped)"},
	} {
		if r := strand(t, env, "", tc.args...); r.code != 0 || !strings.Contains(r.stdout, tc.says) {
			t.Fatalf("%v: %+v, want %q", tc.args, r, tc.says)
		}
	}
	if r := strand(t, env, "", "create", "bad", "--timestamping", "server"); r.code == 0 || !strings.Contains(r.stderr, "client-prefer, client-require or arrival") {
		t.Fatalf("a bad mode: %+v", r)
	}
	if r := strand(t, env, "x\n", "append", "sensors"); r.code == 0 || !strings.Contains(r.stderr, "requires client timestamps") {
		t.Fatalf("append to client-require: %+v", r)
	}
	mustStrand(t, env, "x\n", "append", "arrive")
}
