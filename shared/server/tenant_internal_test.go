package server

import (
	"context"
	"testing"

	"github.com/strandlog/strand/shared/auth"
)

// TestPoolShareIsTenant (issue 31 finding 9): a batch's share of the write
// pool is its tenant's (the root token), not its token's, so tokens minted
// under one root share one share.
func TestPoolShareIsTenant(t *testing.T) {
	s := &Server{cfg: Config{Auth: &auth.Checker{}}}
	ctx := auth.WithGrant(context.Background(), auth.Grant{Ops: []auth.Op{auth.Append}, Hash: "child", Tenant: "root"})
	if got := s.appendOptions(ctx, AppendArgs{}).Tenant; got != "root" {
		t.Errorf("pool tenant %q, want the root %q", got, "root")
	}
}
