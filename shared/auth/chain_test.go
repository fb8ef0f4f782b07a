package auth

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

// TestChainFolds: a token's grant folds in its ancestors' expiry and
// revocation, names its root as its tenant, and a chain longer than
// MaxDepth (or a cycle) is refused as unknown.
func TestChainFolds(t *testing.T) {
	ctx := context.Background()
	meta := metastore.NewMem()
	now := time.UnixMilli(1_800_000_000_000)
	c := &Checker{Meta: meta, Now: func() time.Time { return now }}
	toks := make([]string, MaxDepth+2)
	for i := range toks {
		tok, err := NewToken(bytes.NewReader(bytes.Repeat([]byte{byte(i + 1)}, 32)))
		if err != nil {
			t.Fatal(err)
		}
		toks[i] = tok
		g := Grant{Prefix: "a/", Ops: []Op{Admin}}
		if i > 0 {
			g.Parent = Hash(toks[i-1])
		}
		if i == 1 {
			g.ExpiresMs = now.UnixMilli() + 1000
		}
		if err := IssueGrant(ctx, meta, tok, g, ""); err != nil {
			t.Fatal(err)
		}
	}
	g, err := c.Check(ctx, toks[MaxDepth])
	if err != nil {
		t.Fatal(err)
	}
	if g.Tenant != Hash(toks[0]) || len(g.Chain) != MaxDepth || g.ExpiresMs != now.UnixMilli()+1000 {
		t.Errorf("tenant %.8s, chain %d, expiry %d: want the root, %d ancestors, the grandparent's expiry", g.Tenant, len(g.Chain), g.ExpiresMs, MaxDepth)
	}
	if _, err := c.Check(ctx, toks[MaxDepth+1]); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a chain of %d ancestors: %v, want ErrUnauthenticated", MaxDepth+1, err)
	}
	// Revoking the root voids the deepest descendant at once here.
	root, _ := meta.GetToken(ctx, Hash(toks[0]))
	root.RevokedMs = now.UnixMilli()
	if err := meta.PutToken(ctx, root); err != nil {
		t.Fatal(err)
	}
	c.Forget(root.Hash)
	if _, err := c.Check(ctx, toks[MaxDepth]); !errors.Is(err, ErrRevoked) {
		t.Errorf("after the root's revocation: %v, want ErrRevoked", err)
	}
	// A cycle (never made by CreateToken) is refused.
	a, _ := meta.GetToken(ctx, Hash(toks[0]))
	a.Parent, a.RevokedMs = Hash(toks[1]), 0
	if err := meta.PutToken(ctx, a); err != nil {
		t.Fatal(err)
	}
	c.Forget(a.Hash)
	if _, err := c.Check(ctx, toks[1]); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a cycle: %v, want ErrUnauthenticated", err)
	}
}

// TestTenantStartsAtItsToken (ADR 0060): a token that starts a tenant is
// its own tenant and its descendants': their Tenant is its hash, their
// TenantPrefix its prefix, with its quotas; a token of the root's tree
// without such an ancestor has the root's tenant; expiry and revocation
// still fold in every ancestor, the root's included.
func TestTenantStartsAtItsToken(t *testing.T) {
	ctx := context.Background()
	meta := metastore.NewMem()
	now := time.UnixMilli(1_800_000_000_000)
	c := &Checker{Meta: meta, Now: func() time.Time { return now }}
	issue := func(b byte, g Grant) string {
		tok, err := NewToken(bytes.NewReader(bytes.Repeat([]byte{b}, 32)))
		if err != nil {
			t.Fatal(err)
		}
		if err := IssueGrant(ctx, meta, tok, g, ""); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	root := issue(1, Grant{Ops: []Op{Admin}, ExpiresMs: now.UnixMilli() + 5000})
	tenant := issue(2, Grant{Prefix: "t/", Ops: []Op{Admin}, Parent: Hash(root), Started: true, MaxStreams: 3, AppendBytesPerSec: 4096})
	member := issue(3, Grant{Prefix: "t/x/", Ops: []Op{Read}, Parent: Hash(tenant)})
	other := issue(4, Grant{Prefix: "o/", Ops: []Op{Admin}, Parent: Hash(root)})
	for _, tc := range []struct {
		tok, tenant, prefix string
		started             bool
		streams, rate       int64
	}{
		{root, Hash(root), "", false, 0, 0},
		{tenant, Hash(tenant), "t/", true, 3, 4096},
		{member, Hash(tenant), "t/", true, 3, 4096},
		{other, Hash(root), "", false, 0, 0},
	} {
		g, err := c.Check(ctx, tc.tok)
		if err != nil {
			t.Fatal(err)
		}
		if g.Tenant != tc.tenant || g.TenantPrefix != tc.prefix || g.Started != tc.started || g.MaxStreams != tc.streams || g.AppendBytesPerSec != tc.rate {
			t.Errorf("%.8s: tenant %.8s %q started %v quotas %d %d, want %.8s %q %v %d %d", Hash(tc.tok), g.Tenant, g.TenantPrefix, g.Started, g.MaxStreams, g.AppendBytesPerSec,
				tc.tenant, tc.prefix, tc.started, tc.streams, tc.rate)
		}
		if g.ExpiresMs != now.UnixMilli()+5000 {
			t.Errorf("%.8s: expiry %d, want the root's", Hash(tc.tok), g.ExpiresMs)
		}
	}
}
