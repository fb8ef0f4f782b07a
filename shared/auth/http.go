package auth

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"

	"connectrpc.com/connect"
)

// Middleware authenticates every request from its Authorization header
// before anything reads its body: a request without a valid token is
// answered Unauthenticated (in the protocol it spoke: Connect, gRPC or
// gRPC-Web) at the cost of its headers only, and the grant of a valid one
// is stored in the request's context, where Interceptor finds it and
// FromContext returns it.
func Middleware(c *Checker, next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, err := authenticate(r.Context(), c, r.Header.Get("Authorization"), Source(r.RemoteAddr))
		if err != nil {
			// HTTP/1: answer at once and hang up rather than drain the
			// body of a caller nobody knows.
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
			_ = ew.Write(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Source is the address a request came from, without its port: the key of
// the per-source limits (lookups of unknown tokens, connections not yet
// authenticated). An IPv6 address counts as its /64, the smallest block
// a host is usually given: one host holds a /64 and could otherwise be
// as many sources as it likes.
func Source(remoteAddr string) string {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() && !ip.Is4In6() {
		if p, err := ip.WithZone("").Prefix(64); err == nil {
			return p.String()
		}
	}
	return host
}

// authenticate checks the Authorization header value h and returns ctx with
// the grant, or the Connect error to answer.
func authenticate(ctx context.Context, c *Checker, h, source string) (context.Context, error) {
	g, err := c.CheckFrom(ctx, bearer(h), source)
	switch {
	case errors.Is(err, ErrRevoked), errors.Is(err, ErrExpired):
		return ctx, connect.NewError(connect.CodeUnauthenticated, err)
	case errors.Is(err, ErrRateLimited):
		return ctx, connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, ErrUnauthenticated):
		return ctx, connect.NewError(connect.CodeUnauthenticated,
			errors.New("auth: missing or unknown bearer token: send 'Authorization: Bearer strand_...' (strand dev prints one and writes it to DATA_DIR/token)"))
	case err != nil:
		return ctx, connect.NewError(connect.CodeUnavailable, err)
	}
	return WithGrant(ctx, g), nil
}
