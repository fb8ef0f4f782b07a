package main

import (
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/auth"
)

// TestReview2RebalanceNonAdmin (attack): strand rebalance --apply with a
// token that may not move streams: one over every stream without admin,
// and a tenant admin scoped to a prefix. Every move of the plan is
// refused permission denied (before the server looks at the target star:
// never "unknown star", which the operator's token gets from this dev
// star), the command fails, and nothing moved: the operator's plan is
// the same after.
func TestReview2RebalanceNonAdmin(t *testing.T) {
	d := startDev(t)
	env := d.env()
	for _, name := range []string{"a/1", "a/2", "a/3", "a/4"} {
		mustStrand(t, env, "", "create", name)
	}
	mk := func(prefix, ops string) string {
		t.Helper()
		r := strand(t, env, "", "token", "create", "--prefix", prefix, "--ops", ops)
		secret := strings.TrimSpace(r.stdout)
		if r.code != 0 || !auth.WellFormed(secret) {
			t.Fatalf("token create %s %s: %+v", prefix, ops, r)
		}
		return secret
	}
	for _, tc := range []struct{ prefix, ops string }{{"", "read,append"}, {"a/", "admin,read,append"}} {
		tok := mk(tc.prefix, tc.ops)
		r := strand(t, d.env("STRAND_TOKEN="+tok), "", "rebalance", "--stars", "star-0,star-1", "--apply", "--retry-for", "0")
		refusals := strings.Count(r.stdout, "refused a/")
		if r.code == 0 || refusals != 2 || strings.Count(r.stdout, "permission_denied") != 2 || strings.Contains(r.stdout, "unknown star") || strings.Contains(r.stdout, "moved ") {
			t.Fatalf("rebalance --apply with a token %q %s: exit %d, stdout %q, stderr %q; want 2 moves refused permission denied", tc.prefix, tc.ops, r.code, r.stdout, r.stderr)
		}
	}
	if out := mustStrand(t, env, "", "rebalance", "--stars", "star-0,star-1").stdout; !strings.Contains(out, "2 of 4 streams to move") {
		t.Fatalf("the operator's plan after the refused applies: %q", out)
	}
}
