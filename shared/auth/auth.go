package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/metastore"
)

// Op is an operation a token may be granted.
type Op string

const (
	Read   Op = "read"
	Append Op = "append"
	// Trim allows Trim (erasing a stream's history below a point) and
	// Fence allows Fence (choosing which writer may append): apart from
	// append, since either undoes other writers' work.
	Trim  Op = "trim"
	Fence Op = "fence"
	Admin Op = "admin"
)

// Sentinel errors.
var (
	// ErrUnauthenticated: no token, a malformed one, or one not issued.
	ErrUnauthenticated = errors.New("auth: missing or unknown bearer token")
	// ErrDenied: the token does not grant this operation on this stream.
	ErrDenied = errors.New("auth: permission denied")
	// ErrInvalid: a bad operation name or prefix.
	ErrInvalid = errors.New("auth: invalid argument")
	// ErrExpired: the token was issued with an expiry that has passed.
	ErrExpired = errors.New("auth: token expired")
	// ErrRevoked: the token was revoked.
	ErrRevoked = errors.New("auth: token revoked")
)

// TokenPrefix starts every token.
const TokenPrefix = "strand_"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// ParseOps parses a comma-separated list of operations.
func ParseOps(s string) ([]Op, error) { return ParseOpList(strings.Split(s, ",")) }

// ParseOpList parses operation names (case and surrounding space ignored,
// duplicates and empty names dropped): at least one of read, append,
// trim, fence and admin, else an error wrapping ErrInvalid that names the
// bad one.
func ParseOpList(names []string) ([]Op, error) {
	var ops []Op
	for _, p := range names {
		switch op := Op(strings.TrimSpace(strings.ToLower(p))); op {
		case Read, Append, Trim, Fence, Admin:
			if !slices.Contains(ops, op) {
				ops = append(ops, op)
			}
		case "":
		default:
			return nil, fmt.Errorf("%w: unknown operation %q (want read, append, trim, fence or admin)", ErrInvalid, p)
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%w: no operation (want read, append, trim, fence and/or admin)", ErrInvalid)
	}
	return ops, nil
}

// Hash is the stored form of a token: SHA-256, lowercase hex.
func Hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewToken draws a token from rand (crypto/rand in production).
func NewToken(rand io.Reader) (string, error) {
	var b [32]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", fmt.Errorf("auth: draw token: %w", err)
	}
	return TokenPrefix + strings.ToLower(b32.EncodeToString(b[:])), nil
}

// WellFormed reports whether s looks like a token (it may still be unknown).
func WellFormed(s string) bool {
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(rest) != 52 {
		return false
	}
	_, err := b32.DecodeString(strings.ToUpper(rest))
	return err == nil
}

// Issue stores the grant of an existing token (its hash only).
func Issue(ctx context.Context, meta metastore.Store, token, prefix string, ops []Op) error {
	return IssueGrant(ctx, meta, token, Grant{Prefix: prefix, Ops: ops}, "")
}

// IssueGrant stores g for an existing token (its hash only), with a
// description for people; g.ExpiresMs, if not 0, is when it expires;
// g.Started makes the token start a tenant with quotas g.MaxStreams and
// g.AppendBytesPerSec (0: the star's).
func IssueGrant(ctx context.Context, meta metastore.Store, token string, g Grant, description string) error {
	if !WellFormed(token) {
		return fmt.Errorf("%w: a token is %s followed by 52 base32 characters", ErrInvalid, TokenPrefix)
	}
	if len(g.Ops) == 0 {
		return fmt.Errorf("%w: no operation", ErrInvalid)
	}
	t := metastore.Token{Hash: Hash(token), Prefix: g.Prefix, Description: description, ExpiresMs: g.ExpiresMs, Parent: g.Parent,
		StartsTenant: g.Started, MaxStreams: g.MaxStreams, AppendBytesPerSec: g.AppendBytesPerSec}
	for _, op := range g.Ops {
		t.Ops = append(t.Ops, string(op))
	}
	if err := meta.PutToken(ctx, t); err != nil {
		return fmt.Errorf("auth: store token %.8s...: %w", t.Hash, err)
	}
	return nil
}

// Grant is what a token allows.
type Grant struct {
	Prefix string
	Ops    []Op
	// Hash identifies the token the grant was looked up for (set by
	// Checker; "" otherwise): the key of per-token limits.
	Hash string
	// ExpiresMs: the grant is void from this time on (Unix ms); 0: never.
	ExpiresMs int64
	// RevokedMs: when the token was revoked (Unix ms); 0: it is not.
	RevokedMs int64
	// Parent is the hash of the token that created this one ("": a root).
	Parent string
	// Tenant is the hash of the token that starts the token's tenant (set
	// by Checker): the nearest of the token and its ancestors that starts
	// a tenant (metastore.Token.StartsTenant), else its root (its own for
	// a root). The key of per-tenant limits, so that minting tokens does
	// not multiply them.
	Tenant string
	// TenantPrefix is the prefix of the token that starts the tenant (set
	// by Checker): the namespace its tenant's streams are named under,
	// which the server's stream quota counts.
	TenantPrefix string
	// Started is true when the tenant is started by a token with
	// StartsTenant rather than by a root (set by Checker; given to
	// IssueGrant, the token starts a tenant); MaxStreams and
	// AppendBytesPerSec are that token's quotas (0: the star's).
	Started                       bool
	MaxStreams, AppendBytesPerSec int64
	// Chain holds the hashes of the token's ancestors, parent first (set
	// by Checker). ExpiresMs and RevokedMs fold theirs in: a token is
	// void once any ancestor is.
	Chain []string
}

// MaxDepth bounds a token's ancestors: a token whose chain is longer is
// refused (ErrUnauthenticated), so a lookup costs at most MaxDepth+1
// metastore reads.
const MaxDepth = 8

// Usable reports whether the grant may be used at now: nil, or ErrRevoked
// or ErrExpired with the time.
func (g Grant) Usable(now time.Time) error {
	if g.RevokedMs != 0 {
		return fmt.Errorf("%w at %s: use another token (an admin creates one with strand token create)", ErrRevoked, msTime(g.RevokedMs))
	}
	if g.ExpiresMs != 0 && now.UnixMilli() >= g.ExpiresMs {
		return fmt.Errorf("%w at %s: use another token (an admin creates one with strand token create)", ErrExpired, msTime(g.ExpiresMs))
	}
	return nil
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// Can reports whether the grant covers op (admin covers every operation).
func (g Grant) Can(op Op) bool {
	return slices.Contains(g.Ops, op) || slices.Contains(g.Ops, Admin)
}

// Within reports whether prefix is inside the grant's scope: every stream
// name starting with prefix is covered. A token may mint or revoke only
// tokens whose prefix is within its own.
func (g Grant) Within(prefix string) bool { return strings.HasPrefix(prefix, g.Prefix) }

// Covers reports whether the grant reaches the stream name.
func (g Grant) Covers(name string) bool { return strings.HasPrefix(name, g.Prefix) }

// Allow checks op on stream name: nil, or an error wrapping ErrDenied that
// says what is missing.
func (g Grant) Allow(op Op, name string) error {
	if !g.Can(op) {
		return fmt.Errorf("%w: the token does not grant %q", ErrDenied, op)
	}
	if !g.Covers(name) {
		return fmt.Errorf("%w: the token is scoped to streams starting with %q", ErrDenied, g.Prefix)
	}
	return nil
}

// Checker resolves tokens to grants through the metastore, caching grants
// (and misses) for a short time so that a call costs no metastore read.
//
// What an unknown caller can make it spend is bounded: both caches are
// LRUs of MaxEntries (misses are kept apart, so a flood of unknown tokens
// never evicts a valid grant); concurrent checks of one token share one
// lookup; and lookups of tokens not known to be valid are rate-limited per
// source (SourceRate) and in all (GlobalRate): past them a check fails
// with ErrRateLimited without a metastore read. A valid token whose cached
// grant expired is looked up again without the limit.
type Checker struct {
	Meta metastore.Store
	// TTL is how long a looked-up grant is cached (0: 10 s). A revoked
	// token keeps working at most this long.
	TTL time.Duration
	// Now is the clock for the cache and the rate limits (nil: time.Now).
	Now func() time.Time
	// MaxEntries bounds each cache: grants, misses and sources (0:
	// DefaultMaxEntries).
	MaxEntries int
	// SourceRate and GlobalRate limit lookups of tokens not known valid,
	// per source address and in all (zero: DefaultSourceRate,
	// DefaultGlobalRate).
	SourceRate, GlobalRate Rate

	mu      sync.Mutex
	known   *lru[cached]    // hash -> grant of a valid token
	misses  *lru[time.Time] // hash -> expiry of a miss
	sources *lru[*bucket]   // source -> its lookup bucket
	global  bucket
	flights map[string]*flight
}

// Defaults of Checker.
const DefaultMaxEntries = 10_000

var (
	DefaultSourceRate = Rate{PerSecond: 50, Burst: 200}
	DefaultGlobalRate = Rate{PerSecond: 500, Burst: 2000}
)

// ErrRateLimited: too many lookups of unknown tokens; retry later.
var ErrRateLimited = errors.New("auth: too many lookups of unknown tokens; retry later")

type cached struct {
	g   Grant
	exp time.Time
}

// flight is one metastore lookup that concurrent checks of a token share.
type flight struct {
	done chan struct{}
	g    Grant
	ok   bool
	err  error
}

// Forget drops the cached grant of the token with this hash and of every
// token minted under it, so that this checker sees a revocation (or a new
// grant) at its next call. Other checkers (other servers) see it when
// their cached entry expires, within TTL.
func (c *Checker) Forget(hash string) {
	c.mu.Lock()
	c.init()
	c.known.remove(hash)
	c.misses.remove(hash)
	c.known.removeIf(func(e cached) bool { return slices.Contains(e.g.Chain, hash) })
	c.mu.Unlock()
}

// init makes the caches; c.mu held.
func (c *Checker) init() {
	if c.known != nil {
		return
	}
	n := c.MaxEntries
	if n <= 0 {
		n = DefaultMaxEntries
	}
	c.known, c.misses, c.sources = newLRU[cached](n), newLRU[time.Time](n), newLRU[*bucket](n)
	c.flights = map[string]*flight{}
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// admit takes one lookup from the source's and the global bucket, or
// reports that either is empty; c.mu held.
func (c *Checker) admit(source string, now time.Time) bool {
	gr, sr := c.GlobalRate, c.SourceRate
	if gr == (Rate{}) {
		gr = DefaultGlobalRate
	}
	if sr == (Rate{}) {
		sr = DefaultSourceRate
	}
	c.global.refill(gr, now)
	var sb *bucket
	if source != "" {
		var ok bool
		if sb, ok = c.sources.get(source); !ok {
			sb = &bucket{}
			c.sources.put(source, sb)
		}
		sb.refill(sr, now)
		if sb.tokens < 1 {
			return false
		}
	}
	if c.global.tokens < 1 {
		return false
	}
	c.global.tokens--
	if sb != nil {
		sb.tokens--
	}
	return true
}

// Check resolves a presented token (no source: only the global limit
// applies to its lookup).
func (c *Checker) Check(ctx context.Context, token string) (Grant, error) {
	return c.CheckFrom(ctx, token, "")
}

// CheckFrom resolves a token presented from source (the caller's address):
// its grant, or ErrUnauthenticated, ErrRevoked, ErrExpired (with the
// grant), or ErrRateLimited, or an error of the
// metastore.
func (c *Checker) CheckFrom(ctx context.Context, token, source string) (Grant, error) {
	if !WellFormed(token) {
		return Grant{}, ErrUnauthenticated
	}
	h := Hash(token)
	ttl := c.TTL
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	now := c.now()
	c.mu.Lock()
	c.init()
	e, valid := c.known.get(h)
	if valid && now.Before(e.exp) {
		c.mu.Unlock()
		return e.g, e.g.Usable(now)
	}
	if exp, miss := c.misses.get(h); miss && now.Before(exp) {
		c.mu.Unlock()
		return Grant{}, ErrUnauthenticated
	}
	f, joined := c.flights[h]
	if !joined {
		if !valid && !c.admit(source, now) {
			c.mu.Unlock()
			return Grant{}, ErrRateLimited
		}
		f = &flight{done: make(chan struct{})}
		c.flights[h] = f
	}
	c.mu.Unlock()
	if joined {
		select {
		case <-f.done:
		case <-ctx.Done():
			return Grant{}, ctx.Err()
		}
	} else {
		f.g, f.ok, f.err = c.lookup(ctx, h)
		c.mu.Lock()
		delete(c.flights, h)
		switch {
		case f.err != nil:
		case f.ok:
			c.known.put(h, cached{g: f.g, exp: c.now().Add(ttl)})
			c.misses.remove(h)
		default:
			c.misses.put(h, c.now().Add(ttl))
			c.known.remove(h)
		}
		c.mu.Unlock()
		close(f.done)
	}
	switch {
	case f.err != nil:
		return Grant{}, f.err
	case !f.ok:
		return Grant{}, ErrUnauthenticated
	}
	return f.g, f.g.Usable(now)
}

// lookup reads the token's grant: ok false when it is not issued. It
// reads the token's ancestors too (at most MaxDepth) and folds their
// expiry and revocation into the grant: the earliest expiry, and the
// first revocation found.
func (c *Checker) lookup(ctx context.Context, hash string) (Grant, bool, error) {
	t, err := c.Meta.GetToken(ctx, hash)
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return Grant{}, false, nil
	case err != nil:
		return Grant{}, false, fmt.Errorf("auth: look up token: %w", err)
	}
	g := Grant{Prefix: t.Prefix, Hash: hash, ExpiresMs: t.ExpiresMs, RevokedMs: t.RevokedMs, Parent: t.Parent}
	for _, op := range t.Ops {
		g.Ops = append(g.Ops, Op(op))
	}
	// tenant takes the tenant from token t (hash h): the first that starts
	// one, else (called last) the root.
	tenant := func(h string, t metastore.Token) {
		if !g.Started {
			g.Tenant, g.TenantPrefix = h, t.Prefix
			g.Started, g.MaxStreams, g.AppendBytesPerSec = t.StartsTenant, t.MaxStreams, t.AppendBytesPerSec
		}
	}
	tenant(hash, t)
	for p := t.Parent; p != ""; p = t.Parent {
		if len(g.Chain) == MaxDepth || slices.Contains(g.Chain, p) || p == hash {
			return Grant{}, false, nil // too deep or a cycle: never issued by CreateToken
		}
		g.Chain = append(g.Chain, p)
		t, err = c.Meta.GetToken(ctx, p)
		switch {
		case errors.Is(err, metastore.ErrNotFound):
			return Grant{}, false, nil // an ancestor deleted: void
		case err != nil:
			return Grant{}, false, fmt.Errorf("auth: look up token %.8s...'s ancestor: %w", hash, err)
		}
		tenant(p, t)
		if t.ExpiresMs != 0 && (g.ExpiresMs == 0 || t.ExpiresMs < g.ExpiresMs) {
			g.ExpiresMs = t.ExpiresMs
		}
		if g.RevokedMs == 0 && t.RevokedMs != 0 {
			g.RevokedMs = t.RevokedMs
		}
	}
	return g, true, nil
}

type grantKey struct{}

// FromContext returns the grant the interceptor stored.
func FromContext(ctx context.Context) (Grant, bool) {
	g, ok := ctx.Value(grantKey{}).(Grant)
	return g, ok
}

// WithGrant stores g in ctx (for the interceptor and tests).
func WithGrant(ctx context.Context, g Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, g)
}

// Bearer extracts the token from an Authorization header value ("" when
// it holds none).
func Bearer(h string) string { return bearer(h) }

func bearer(h string) string {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// Interceptor authenticates every unary and streaming call with c and stores
// the grant in the context; a call without a valid token fails with
// CodeUnauthenticated before the handler runs.
func Interceptor(c *Checker) connect.Interceptor { return interceptor{c} }

type interceptor struct{ c *Checker }

// authenticate uses the grant Middleware stored, or checks the header.
func (i interceptor) authenticate(ctx context.Context, h string) (context.Context, error) {
	if _, ok := FromContext(ctx); ok {
		return ctx, nil
	}
	return authenticate(ctx, i.c, h, "")
}

func (i interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, err := i.authenticate(ctx, req.Header().Get("Authorization"))
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (i interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.authenticate(ctx, conn.RequestHeader().Get("Authorization"))
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// PrefixWarning explains, for a prefix that does not end in a separator
// (any character but a letter or digit), what else it covers: a prefix is
// a raw string prefix, so "team-a" also covers "team-admin/...". It is ""
// for the empty prefix and for one ending in a separator.
func PrefixWarning(prefix string) string {
	if prefix == "" {
		return ""
	}
	r, _ := utf8.DecodeLastRuneInString(prefix)
	if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
		return ""
	}
	return fmt.Sprintf("prefix %q does not end in a separator: it covers every stream name starting with it, such as %q, not only %q; end it with one (e.g. %q) to scope it to a namespace",
		prefix, prefix+"x/...", prefix+"/...", prefix+"/")
}
