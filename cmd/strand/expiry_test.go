package main

import (
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/auth"
)

// TestTokenExpiryAndRevocation: a token created with --expires works until
// then and is refused after with a message that says it expired; a revoked
// token is refused with one that says revoked, not unknown. Issue 20 item 4.
func TestTokenExpiryAndRevocation(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "a/s")
	mk := func(args ...string) string {
		t.Helper()
		r := strand(t, env, "", append([]string{"token", "create", "--prefix", "a/", "--ops", "read"}, args...)...)
		secret := strings.TrimSpace(r.stdout)
		if r.code != 0 || !auth.WellFormed(secret) {
			t.Fatalf("token create %v: %+v", args, r)
		}
		return secret
	}
	created := time.Now()
	short := mk("--expires", "4s")
	expired := time.Now().Add(4*time.Second + 100*time.Millisecond) // the CLI read its clock before this
	if time.Since(created) > 3*time.Second {
		t.Skip("the machine is too slow to use a token within its 4 s")
	}
	revoked := mk()
	as := func(tok string) result { return strand(t, d.env("STRAND_TOKEN="+tok), "", "check-tail", "a/s") }
	if r := as(short); r.code != 0 {
		t.Fatalf("a token before its expiry: %+v", r)
	}
	if r := strand(t, env, "", "token", "ls"); !strings.Contains(r.stdout, auth.Hash(short)+"\t\"a/\"\tread\t\texpires ") {
		t.Fatalf("token ls does not show the expiry: %q", r.stdout)
	}
	if r := strand(t, env, "", "token", "revoke", auth.Hash(revoked)); r.code != 0 {
		t.Fatalf("revoke: %+v", r)
	}
	if r := as(revoked); r.code == 0 || !strings.Contains(r.stderr, "auth: token revoked at") || !strings.Contains(r.stderr, "hint: the token was revoked") {
		t.Fatalf("a revoked token: %+v", r)
	}
	if r := strand(t, env, "", "token", "ls"); strings.Contains(r.stdout, auth.Hash(revoked)) {
		t.Fatalf("token ls lists a revoked token: %q", r.stdout)
	}
	time.Sleep(time.Until(expired))
	if r := as(short); r.code == 0 || !strings.Contains(r.stderr, "auth: token expired at") || !strings.Contains(r.stderr, "hint: the token has expired") {
		t.Fatalf("an expired token: %+v", r)
	}
	for _, bad := range []string{"-1h", "yesterday", "2001-01-01T00:00:00Z"} {
		r := strand(t, env, "", "token", "create", "--prefix", "a/", "--ops", "read", "--expires", bad)
		if r.code == 0 || !strings.Contains(r.stderr, "expires") {
			t.Errorf("--expires %s: %+v", bad, r)
		}
	}
}
