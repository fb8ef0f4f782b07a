package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore"
)

// tokenAdmin authorizes managing tokens: the caller needs the admin
// operation.
func (s *Server) tokenAdmin(ctx context.Context, what string) (auth.Grant, error) {
	g := s.grant(ctx)
	if !g.Can(auth.Admin) {
		return g, connect.NewError(connect.CodePermissionDenied,
			fmt.Errorf("%w: %s needs a token with the admin operation", auth.ErrDenied, what))
	}
	return g, nil
}

// within authorizes managing tokens scoped to prefix: it must be within the
// caller's prefix.
func within(g auth.Grant, what, prefix string) error {
	if g.Within(prefix) {
		return nil
	}
	return connect.NewError(connect.CodePermissionDenied,
		fmt.Errorf("%w: %s for prefix %q: the calling token is scoped to %q, and a token may only manage tokens whose prefix starts with its own", auth.ErrDenied, what, prefix, g.Prefix))
}

func tokenInfo(t metastore.Token) *strandv1.TokenInfo {
	return &strandv1.TokenInfo{Hash: t.Hash, Prefix: t.Prefix, Ops: t.Ops, Description: t.Description, ExpiresMs: t.ExpiresMs,
		Tenant: t.StartsTenant, MaxStreams: t.MaxStreams, AppendBytesPerSec: t.AppendBytesPerSec}
}

// CreateToken implements the API: it draws a token, stores its hash with
// the grant and its parent (the caller), and returns the secret once. The
// new token's prefix, operations and expiry are within the caller's: an
// expiry later than the caller's (or none) becomes the caller's. The secret is never logged.
func (s *Server) CreateToken(ctx context.Context, req *connect.Request[strandv1.CreateTokenRequest]) (*connect.Response[strandv1.CreateTokenResponse], error) {
	a, err := ParseCreateToken(req.Msg)
	if err != nil {
		return nil, err
	}
	g, err := s.tokenAdmin(ctx, "creating a token")
	if err != nil {
		return nil, err
	}
	if err := within(g, "creating a token", a.Prefix); err != nil {
		return nil, err
	}
	for _, op := range a.Ops {
		if !g.Can(op) {
			return nil, connect.NewError(connect.CodePermissionDenied,
				fmt.Errorf("%w: creating a token with %q: the calling token does not hold it", auth.ErrDenied, op))
		}
	}
	if now := s.clk.Now().UnixMilli(); a.ExpiresMs != 0 && a.ExpiresMs <= now {
		return nil, invalid("expires_ms %d is not in the future (now is %d)", a.ExpiresMs, now)
	}
	if err := mayStartTenant(g, a); err != nil {
		return nil, err
	}
	if len(g.Chain) >= auth.MaxDepth {
		return nil, connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("creating a token: the calling token has %d ancestors, the most a token may have (%d); create it with a token nearer the root", len(g.Chain), auth.MaxDepth))
	}
	// A token never outlives its creator: its expiry is at the latest the
	// caller's (which folds in the caller's ancestors').
	if g.ExpiresMs != 0 && (a.ExpiresMs == 0 || a.ExpiresMs > g.ExpiresMs) {
		a.ExpiresMs = g.ExpiresMs
	}
	secret, err := auth.NewToken(s.cfg.Rand)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	if err := auth.IssueGrant(ctx, s.cfg.Meta, secret, auth.Grant{Prefix: a.Prefix, Ops: a.Ops, ExpiresMs: a.ExpiresMs, Parent: g.Hash,
		Started: a.Tenant, MaxStreams: a.MaxStreams, AppendBytesPerSec: a.AppendBytesPerSec}, a.Description); err != nil {
		return nil, toConnect(err)
	}
	hash := auth.Hash(secret)
	if s.cfg.Auth != nil {
		s.cfg.Auth.Forget(hash) // no stale cached miss
	}
	t := metastore.Token{Hash: hash, Prefix: a.Prefix, Description: a.Description, ExpiresMs: a.ExpiresMs, Parent: g.Hash,
		StartsTenant: a.Tenant, MaxStreams: a.MaxStreams, AppendBytesPerSec: a.AppendBytesPerSec}
	for _, op := range a.Ops {
		t.Ops = append(t.Ops, string(op))
	}
	s.log.Info("token created", "hash", hash, "prefix", t.Prefix, "ops", strings.Join(t.Ops, ","), "caller_prefix", g.Prefix)
	if w := auth.PrefixWarning(t.Prefix); w != "" {
		s.log.Warn("token created with a prefix that does not end in a separator", "hash", hash, "why", w)
	}
	return connect.NewResponse(&strandv1.CreateTokenResponse{Token: secret, Info: tokenInfo(t)}), nil
}

// RevokeToken implements the API: it marks the token revoked (the item
// stays, a tombstone, so that its use is refused as revoked, not unknown).
// Every token minted under it is void from then on (auth.Checker folds
// ancestors in). This server's checker forgets the grants at once; other
// servers' within their cache TTL (10 s). Open sessions end within
// Limits.SessionRecheck after that.
func (s *Server) RevokeToken(ctx context.Context, req *connect.Request[strandv1.RevokeTokenRequest]) (*connect.Response[strandv1.RevokeTokenResponse], error) {
	hash, err := ParseRevokeToken(req.Msg)
	if err != nil {
		return nil, err
	}
	g, err := s.tokenAdmin(ctx, "revoking a token")
	if err != nil {
		return nil, err
	}
	t, err := s.cfg.Meta.GetToken(ctx, hash)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil, connect.NewError(connect.CodeNotFound,
			fmt.Errorf("no token has hash %s: it was never issued, or was deleted (strand token ls lists them)", hash))
	}
	if err != nil {
		return nil, toConnect(fmt.Errorf("look up token %.8s...: %w", hash, err))
	}
	if err := within(g, "revoking a token", t.Prefix); err != nil {
		return nil, err
	}
	if t.RevokedMs != 0 {
		return nil, connect.NewError(connect.CodeNotFound,
			fmt.Errorf("token %s was revoked already, at %s: nothing to do", hash, time.UnixMilli(t.RevokedMs).UTC().Format(time.RFC3339)))
	}
	t.RevokedMs = s.clk.Now().UnixMilli()
	if err := s.cfg.Meta.PutToken(ctx, t); err != nil {
		return nil, toConnect(fmt.Errorf("revoke token %.8s...: %w", hash, err))
	}
	if s.cfg.Auth != nil {
		s.cfg.Auth.Forget(hash)
	}
	s.log.Info("token revoked", "hash", hash, "prefix", t.Prefix, "caller_prefix", g.Prefix)
	return connect.NewResponse(&strandv1.RevokeTokenResponse{}), nil
}

// ListTokens implements the API: tokens under both the request's prefix and
// the caller's, never their secrets.
func (s *Server) ListTokens(ctx context.Context, req *connect.Request[strandv1.ListTokensRequest]) (*connect.Response[strandv1.ListTokensResponse], error) {
	prefix, err := ParseListTokens(req.Msg)
	if err != nil {
		return nil, err
	}
	g, err := s.tokenAdmin(ctx, "listing tokens")
	if err != nil {
		return nil, err
	}
	switch {
	case g.Within(prefix):
	case strings.HasPrefix(g.Prefix, prefix):
		prefix = g.Prefix // narrowed to the caller's scope
	default:
		return connect.NewResponse(&strandv1.ListTokensResponse{}), nil // disjoint: none visible
	}
	ts, err := s.cfg.Meta.ListTokens(ctx, prefix)
	if err != nil {
		return nil, toConnect(fmt.Errorf("list tokens: %w", err))
	}
	out := &strandv1.ListTokensResponse{}
	for _, t := range ts {
		if t.RevokedMs != 0 {
			continue // a tombstone
		}
		out.Tokens = append(out.Tokens, tokenInfo(t))
	}
	return connect.NewResponse(out), nil
}
