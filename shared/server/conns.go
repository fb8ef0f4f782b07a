package server

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ConnLimits bound the API's connections (NewListener).
type ConnLimits struct {
	// MaxConns bounds the open connections (0: DefaultMaxConns). A new
	// connection past it sheds an old one (see NewListener) or, when every
	// one is busy, waits in the listen backlog.
	MaxConns int
	// MaxConnsPerSource bounds the open connections of one source address
	// (0: DefaultMaxConnsPerSource); past it a new one is closed at once.
	MaxConnsPerSource int
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
	DefaultAuthDeadline      = 10 * time.Second
	DefaultIdleShed          = time.Second
)

func (l ConnLimits) withDefaults() ConnLimits {
	l.MaxConns = positiveOr(l.MaxConns, DefaultMaxConns)
	l.MaxConnsPerSource = positiveOr(l.MaxConnsPerSource, DefaultMaxConnsPerSource)
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
//   - a source address holds at most MaxConnsPerSource: a connection past
//     it is closed as it is accepted;
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
	cl := &connListener{Listener: ln, l: l, conns: map[*limitConn]struct{}{}, sources: map[string]int{}}
	cl.cond = sync.NewCond(&cl.mu)
	return cl
}

type connListener struct {
	net.Listener
	l       ConnLimits
	mu      sync.Mutex
	cond    *sync.Cond // a connection closed
	conns   map[*limitConn]struct{}
	sources map[string]int
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
		if cl.sources[c.src]--; cl.sources[c.src] <= 0 {
			delete(cl.sources, c.src)
		}
	}
	cl.mu.Unlock()
	cl.cond.Broadcast()
}

func sourceOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitConn is one connection of a connListener.
type limitConn struct {
	net.Conn
	cl       *connListener
	src      string
	accepted time.Time
	timer    *time.Timer
	authed   atomic.Bool
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
// valid token: the connection is no longer closed at its AuthDeadline
// nor shed first.
func markAuthenticated(ctx context.Context) {
	if lc, ok := ctx.Value(connKey{}).(*limitConn); ok && !lc.authed.Load() {
		lc.authed.Store(true)
		lc.timer.Stop()
	}
}
