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
