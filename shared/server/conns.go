package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/auth"
)

// ConnLimits bound the API's connections (NewListener).
type ConnLimits struct {
	// MaxConns bounds the open connections (0: DefaultMaxConns). A new
	// connection past it sheds an old one (see NewListener) or, when every
	// one is busy, waits in the listen backlog.
	MaxConns int
	// MaxConnsPerSource bounds the open connections of one source address
	// that have made no call with a tenant's valid token (0:
	// DefaultMaxConnsPerSource); past it a new one is closed at once.
	MaxConnsPerSource int
	// MaxConnsPerTenant bounds the connections charged to one tenant (0:
	// DefaultMaxConnsPerTenant; at most half of MaxConns): a connection
	// is charged to the tenant of its first call with a valid token, and
	// then no longer counts in its source's (a standby relaying clients,
	// ADR 0051, is not held to one source's share). A call that would
	// charge a tenant past it is refused (ErrTooManyConns) and leaves
	// its connection a stranger.
	MaxConnsPerTenant int
	// AuthDeadline closes a connection that has made no call with a valid
	// token this long after it was accepted (0: DefaultAuthDeadline).
	// Calls of health and reflection, which need no token, do not count.
	AuthDeadline time.Duration
	// IdleShed is how long a connection must have moved no bytes to be
	// shed for a new one (0: DefaultIdleShed).
	IdleShed time.Duration
}

// Defaults of ConnLimits.
const (
	DefaultMaxConnsPerSource = 256
	DefaultMaxConnsPerTenant = 512
	DefaultAuthDeadline      = 10 * time.Second
	DefaultIdleShed          = time.Second
)

func (l ConnLimits) withDefaults() ConnLimits {
	l.MaxConns = positiveOr(l.MaxConns, DefaultMaxConns)
	l.MaxConnsPerSource = positiveOr(l.MaxConnsPerSource, DefaultMaxConnsPerSource)
	l.MaxConnsPerTenant = min(positiveOr(l.MaxConnsPerTenant, DefaultMaxConnsPerTenant), max(l.MaxConns/2, 1))
	l.AuthDeadline = positiveOr(l.AuthDeadline, DefaultAuthDeadline)
	l.IdleShed = positiveOr(l.IdleShed, DefaultIdleShed)
	return l
}

// LimitListener is NewListener with MaxConns n and the other limits'
// defaults.
func LimitListener(ln net.Listener, n int) net.Listener {
	return NewListener(ln, ConnLimits{MaxConns: n})
}

// NewListener returns a listener that bounds its connections by l:
//
//   - a source address holds at most MaxConnsPerSource connections not
//     charged to a tenant: a connection past it is closed as it is
//     accepted; a connection's first call with a tenant's valid token
//     moves it to that tenant's count (MaxConnsPerTenant);
//   - a connection that has not made a call with a valid token within
//     AuthDeadline of its accept is closed (the server marks it through
//     NewHTTPServer's ConnContext when a call authenticates), so a
//     stranger holds one no longer than that;
//   - past MaxConns, accepting a new connection first closes an old one:
//     the oldest accepted that never authenticated, else the one idle (no
//     byte read or written for IdleShed) longest; only when every one is
//     busy does Accept wait for one to close.
//
// A stranger's connections therefore never keep an authenticated
// caller out for longer than AuthDeadline (issue 31).
func NewListener(ln net.Listener, l ConnLimits) net.Listener {
	l = l.withDefaults()
	cl := &connListener{Listener: ln, l: l, conns: map[*limitConn]struct{}{}, sources: map[string]int{}, tenants: map[string]int{}}
	cl.cond = sync.NewCond(&cl.mu)
	return cl
}

type connListener struct {
	net.Listener
	l       ConnLimits
	mu      sync.Mutex
	cond    *sync.Cond // a connection closed
	conns   map[*limitConn]struct{}
	sources map[string]int // connections not charged to a tenant, by source
	tenants map[string]int // connections charged to a tenant (charge)
}

func (cl *connListener) Accept() (net.Conn, error) {
	for {
		c, err := cl.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c.RemoteAddr())
		cl.mu.Lock()
		if cl.sources[src] >= cl.l.MaxConnsPerSource {
			cl.mu.Unlock()
			_ = c.Close() // over its source's cap
			continue
		}
		cl.room()
		lc := &limitConn{Conn: c, cl: cl, src: src, accepted: time.Now()}
		lc.touch()
		lc.timer = time.AfterFunc(cl.l.AuthDeadline, func() {
			if !lc.authed.Load() {
				_ = lc.Close()
			}
		})
		cl.conns[lc] = struct{}{}
		cl.sources[src]++
		cl.mu.Unlock()
		return lc, nil
	}
}

// room makes room for one more connection (accepted, not yet counted):
// it sheds one past MaxConns, or waits for one to close when none may be
// shed. Called with cl.mu, which it may release while it waits.
func (cl *connListener) room() {
	for len(cl.conns) >= cl.l.MaxConns {
		if v := cl.shed(); v != nil {
			cl.mu.Unlock()
			_ = v.Close()
			cl.mu.Lock()
			continue
		}
		// Every connection is busy: wait for a close, or look again
		// after IdleShed, when one may have become idle.
		t := time.AfterFunc(cl.l.IdleShed, cl.cond.Broadcast)
		cl.cond.Wait()
		t.Stop()
	}
}

// shed picks the connection to close for a new one: the oldest that never
// authenticated, else the longest idle past IdleShed; nil: none. Called
// with cl.mu.
func (cl *connListener) shed() *limitConn {
	var stranger, idle *limitConn
	now := time.Now().UnixNano()
	for c := range cl.conns {
		if !c.authed.Load() {
			if stranger == nil || c.accepted.Before(stranger.accepted) {
				stranger = c
			}
			continue
		}
		if last := c.last.Load(); now-last >= int64(cl.l.IdleShed) && (idle == nil || last < idle.last.Load()) {
			idle = c
		}
	}
	if stranger != nil {
		return stranger
	}
	return idle
}

func (cl *connListener) release(c *limitConn) {
	cl.mu.Lock()
	c.timer.Stop() // set under cl.mu before c was counted
	if _, ok := cl.conns[c]; ok {
		delete(cl.conns, c)
		if c.tenant != "" {
			uncount(cl.tenants, c.tenant)
		} else {
			uncount(cl.sources, c.src)
		}
	}
	cl.mu.Unlock()
	cl.cond.Broadcast()
}

// charge moves c from its source's count to tenant's, or refuses with
// ErrTooManyConns when tenant has its share. A connection charged
// already, or closed, is left as it is.
func (cl *connListener) charge(c *limitConn, tenant string) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if _, open := cl.conns[c]; !open || c.tenant != "" {
		return nil
	}
	if cl.tenants[tenant] >= cl.l.MaxConnsPerTenant {
		return fmt.Errorf("%w: tenant %.8s... (the tokens under one root token) already has %d connections to this server (its share); close one", ErrTooManyConns, tenant, cl.l.MaxConnsPerTenant)
	}
	cl.tenants[tenant]++
	uncount(cl.sources, c.src)
	c.tenant = tenant
	return nil
}

// uncount takes one off m[k], forgetting k at zero.
func uncount(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// sourceOf is a's per-source key (auth.Source: an IPv6 address counts
// as its /64).
func sourceOf(a net.Addr) string { return auth.Source(a.String()) }

// limitConn is one connection of a connListener.
type limitConn struct {
	net.Conn
	cl       *connListener
	src      string
	accepted time.Time
	timer    *time.Timer
	authed   atomic.Bool
	tenant   string       // charged to ("": to src; under cl.mu)
	last     atomic.Int64 // Unix ns of the last byte read or written
	once     sync.Once
}

func (c *limitConn) touch() { c.last.Store(time.Now().UnixNano()) }

func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *limitConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.cl.release(c) })
	return err
}

type connKey struct{}

// withConn is NewHTTPServer's ConnContext: it keeps the call's
// connection, so that authenticating marks it (markAuthenticated).
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// markAuthenticated records that a call on ctx's connection presented a
// valid token of tenant ("": authentication is off): the connection is
// charged to tenant rather than its source, and no longer closed at its
// AuthDeadline nor shed first. ErrTooManyConns: tenant has its share of
// connections; the connection stays a stranger.
func markAuthenticated(ctx context.Context, tenant string) error {
	lc, ok := ctx.Value(connKey{}).(*limitConn)
	if !ok || lc.authed.Load() {
		return nil
	}
	if tenant != "" {
		if err := lc.cl.charge(lc, tenant); err != nil {
			return err
		}
	}
	lc.authed.Store(true)
	lc.timer.Stop()
	return nil
}

// ErrTooManyConns: a call would charge its tenant past its share of the
// server's connections (ConnLimits.MaxConnsPerTenant).
var ErrTooManyConns = errors.New("server: too many connections")
