package auth

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

func TestTokenFormatAndHash(t *testing.T) {
	tok, err := NewToken(bytes.NewReader(bytes.Repeat([]byte{7}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+52 || !WellFormed(tok) {
		t.Fatalf("token %q is not well formed", tok)
	}
	for _, bad := range []string{"", "strand_", "Bearer x", tok[:len(tok)-1], strings.Replace(tok, "strand_", "strond_", 1), tok + "a"} {
		if WellFormed(bad) {
			t.Errorf("WellFormed(%q) = true", bad)
		}
	}
	if h := Hash(tok); len(h) != 64 || h == tok || strings.Contains(h, tok) {
		t.Fatalf("hash %q", h)
	}
	if _, err := NewToken(bytes.NewReader(nil)); err == nil {
		t.Fatal("short randomness accepted")
	}
}

func TestParseOps(t *testing.T) {
	ops, err := ParseOps("read, APPEND,read")
	if err != nil || len(ops) != 2 || ops[0] != Read || ops[1] != Append {
		t.Fatalf("ops %v err %v", ops, err)
	}
	for _, bad := range []string{"", " , ", "write", "read,delete"} {
		if _, err := ParseOps(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseOps(%q) = %v", bad, err)
		}
	}
}

func TestGrant(t *testing.T) {
	g := Grant{Prefix: "logs/", Ops: []Op{Read}}
	if err := g.Allow(Read, "logs/a"); err != nil {
		t.Fatal(err)
	}
	if err := g.Allow(Append, "logs/a"); !errors.Is(err, ErrDenied) {
		t.Fatalf("append with a read token: %v", err)
	}
	if err := g.Allow(Read, "metrics/a"); !errors.Is(err, ErrDenied) {
		t.Fatalf("read outside the prefix: %v", err)
	}
	admin := Grant{Ops: []Op{Admin}}
	for _, op := range []Op{Read, Append, Admin} {
		if err := admin.Allow(op, "anything"); err != nil {
			t.Fatalf("admin %s: %v", op, err)
		}
	}
}

func TestCheckerStoresOnlyTheHash(t *testing.T) {
	ctx := context.Background()
	meta := metastore.NewMem()
	tok, _ := NewToken(bytes.NewReader(bytes.Repeat([]byte{1}, 32)))
	if err := Issue(ctx, meta, tok, "p/", []Op{Append}); err != nil {
		t.Fatal(err)
	}
	got, err := meta.GetToken(ctx, Hash(tok))
	if err != nil || got.Prefix != "p/" || len(got.Ops) != 1 || got.Ops[0] != "append" {
		t.Fatalf("stored %+v, %v", got, err)
	}
	if _, err := meta.GetToken(ctx, tok); err == nil {
		t.Fatal("the secret itself is a key")
	}
	now := time.Unix(0, 0)
	c := &Checker{Meta: meta, Now: func() time.Time { return now }}
	g, err := c.Check(ctx, tok)
	if err != nil || g.Prefix != "p/" || !g.Can(Append) || g.Can(Read) {
		t.Fatalf("grant %+v, %v", g, err)
	}
	other, _ := NewToken(bytes.NewReader(bytes.Repeat([]byte{2}, 32)))
	if _, err := c.Check(ctx, other); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("unknown token: %v", err)
	}
	// A miss is cached; once issued, the token works after the TTL.
	if err := Issue(ctx, meta, other, "", []Op{Read}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(ctx, other); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("cached miss: %v", err)
	}
	now = now.Add(time.Minute)
	if _, err := c.Check(ctx, other); err != nil {
		t.Fatalf("after TTL: %v", err)
	}
	if _, err := c.Check(ctx, "not-a-token"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatal("malformed token accepted")
	}
}

func TestBearer(t *testing.T) {
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "abc": "", "": ""} {
		if got := bearer(h); got != want {
			t.Errorf("bearer(%q) = %q, want %q", h, got, want)
		}
	}
}

func TestParseOpListAndWithin(t *testing.T) {
	ops, err := ParseOpList([]string{" Admin", "read", "", "admin"})
	if err != nil || len(ops) != 2 || ops[0] != Admin || ops[1] != Read {
		t.Fatalf("ops %v err %v", ops, err)
	}
	for _, bad := range [][]string{nil, {""}, {"read,append"}, {"write"}} {
		if _, err := ParseOpList(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseOpList(%q) = %v", bad, err)
		}
	}
	g := Grant{Prefix: "team-a/", Ops: []Op{Admin}}
	for p, want := range map[string]bool{"team-a/": true, "team-a/x/": true, "": false, "team-": false, "team-b/": false} {
		if g.Within(p) != want {
			t.Errorf("Within(%q) = %v", p, !want)
		}
	}
	if !(Grant{}).Within("") || !(Grant{}).Within("anything") {
		t.Error("the empty prefix does not contain everything")
	}
}

func TestForgetSeesARevocationAtOnce(t *testing.T) {
	ctx := context.Background()
	meta := metastore.NewMem()
	tok, _ := NewToken(bytes.NewReader(bytes.Repeat([]byte{3}, 32)))
	if err := IssueGrant(ctx, meta, tok, Grant{Prefix: "a/", Ops: []Op{Read}}, "ci reader"); err != nil {
		t.Fatal(err)
	}
	if st, err := meta.GetToken(ctx, Hash(tok)); err != nil || st.Description != "ci reader" {
		t.Fatalf("stored %+v %v", st, err)
	}
	now := time.Unix(0, 0)
	c := &Checker{Meta: meta, Now: func() time.Time { return now }}
	if _, err := c.Check(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := meta.DeleteToken(ctx, Hash(tok)); err != nil {
		t.Fatal(err)
	}
	// Cached: still allowed until the TTL ends, or until Forget.
	if _, err := c.Check(ctx, tok); err != nil {
		t.Fatalf("cached grant: %v", err)
	}
	c.Forget(Hash(tok))
	if _, err := c.Check(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after Forget: %v", err)
	}
	// Another checker that cached the grant refuses it once its TTL passed.
	if err := IssueGrant(ctx, meta, tok, Grant{Ops: []Op{Read}}, ""); err != nil {
		t.Fatal(err)
	}
	other := &Checker{Meta: meta, Now: func() time.Time { return now }}
	if _, err := other.Check(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := meta.DeleteToken(ctx, Hash(tok)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(9 * time.Second)
	if _, err := other.Check(ctx, tok); err != nil {
		t.Fatalf("within the TTL: %v", err)
	}
	now = now.Add(2 * time.Second)
	if _, err := other.Check(ctx, tok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after the TTL: %v", err)
	}
}

// TestExpiredAndRevokedGrants: a token past its expiry, even with its grant
// cached, and a revoked one are refused with ErrExpired and ErrRevoked
// (not ErrUnauthenticated), each with its time.
func TestExpiredAndRevokedGrants(t *testing.T) {
	ctx := context.Background()
	meta := metastore.NewMem()
	now := time.UnixMilli(1_700_000_000_000)
	c := &Checker{Meta: meta, Now: func() time.Time { return now }}
	exp, rev := tokenN(t, 9001), tokenN(t, 9002)
	if err := IssueGrant(ctx, meta, exp, Grant{Ops: []Op{Read}, ExpiresMs: now.Add(time.Second).UnixMilli()}, ""); err != nil {
		t.Fatal(err)
	}
	if err := meta.PutToken(ctx, metastore.Token{Hash: Hash(rev), Ops: []string{"read"}, RevokedMs: now.UnixMilli() - 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(ctx, exp); err != nil {
		t.Fatalf("before its expiry: %v", err)
	}
	now = now.Add(time.Second) // the grant is still cached (TTL 10 s)
	if _, err := c.Check(ctx, exp); !errors.Is(err, ErrExpired) || errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "2023-11-14T22:13:21Z") {
		t.Fatalf("at its expiry: %v", err)
	}
	if _, err := c.Check(ctx, rev); !errors.Is(err, ErrRevoked) || !strings.Contains(err.Error(), "revoked at 2023-11-14T22:13:19Z") {
		t.Fatalf("revoked: %v", err)
	}
}
