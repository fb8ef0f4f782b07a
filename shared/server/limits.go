package server

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/auth"
)

// Limits bound what one request may cost the server. The largest legal
// request is an Append of 1 MiB of encoded records (format.MaxBatchBytes):
// about 1 MiB as protobuf, up to about 4.2 MiB as JSON when a batch is made
// of one-byte headers with every field spelled out (base64, field names):
// the default message limit, 6 MiB, sits above both.
type Limits struct {
	// MaxMessageBytes bounds one request message, as received and after
	// decompression, unary or in a stream (0: DefaultMaxMessageBytes).
	// Larger is ResourceExhausted.
	MaxMessageBytes int
	// MaxBodyBytes bounds the HTTP body of every call but AppendSession,
	// compressed or not (0: MaxMessageBytes + 64 KiB for framing).
	MaxBodyBytes int64
	// BodyTimeout bounds reading the body of every call but AppendSession,
	// from the end of its headers (0: DefaultBodyTimeout). A body that
	// trickles in slower is cut off.
	BodyTimeout time.Duration
	// MaxSessionsPerToken bounds the sessions (AppendSession and
	// ReadSession) one token holds open on this server (0:
	// DefaultMaxSessionsPerToken); past it a session is ResourceExhausted.
	// It applies with authentication only.
	MaxSessionsPerToken int
}

// Defaults of Limits and of NewHTTPServer.
const (
	DefaultMaxMessageBytes     = 6 << 20
	DefaultBodyTimeout         = 30 * time.Second
	DefaultMaxSessionsPerToken = 1000
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection idle this long.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's headers (and URL).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConcurrentStreams bounds the HTTP/2 streams (calls) of one
	// connection.
	DefaultMaxConcurrentStreams = 100
	// DefaultMaxConns bounds the API's open connections; more wait in the
	// listen backlog.
	DefaultMaxConns = 1024
)

func (l Limits) withDefaults() Limits {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = int64(l.MaxMessageBytes) + 64<<10
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.MaxSessionsPerToken <= 0 {
		l.MaxSessionsPerToken = DefaultMaxSessionsPerToken
	}
	return l
}

// Sentinel errors of the limits.
var (
	// ErrTooLarge: a request message or body over its limit.
	ErrTooLarge = errors.New("server: request too large")
	// ErrTooMany: a token over its session limit.
	ErrTooMany = errors.New("server: too many sessions")
)

// handlerOptions bound every message the Connect handler reads: its size as
// received and once decompressed. Connect's own gzip decompressor would, on
// a message over the limit, inflate the rest only to report its size (a
// 4 MB bomb costs seconds of CPU); this one stops at the limit.
func (l Limits) handlerOptions() []connect.HandlerOption {
	limit := int64(l.MaxMessageBytes) + 1 // Connect reads one byte past its limit to detect the excess
	return []connect.HandlerOption{
		connect.WithReadMaxBytes(l.MaxMessageBytes),
		connect.WithCompression("gzip",
			func() connect.Decompressor { return &cappedGzip{max: limit} },
			func() connect.Compressor { return gzip.NewWriter(io.Discard) }),
	}
}

// cappedGzip inflates at most max bytes, then fails with ErrTooLarge.
type cappedGzip struct {
	zr     gzip.Reader
	n, max int64
}

func (d *cappedGzip) Read(p []byte) (int, error) {
	if d.n >= d.max {
		return 0, fmt.Errorf("%w: inflates past %d bytes", ErrTooLarge, d.max-1)
	}
	if int64(len(p)) > d.max-d.n {
		p = p[:d.max-d.n]
	}
	n, err := d.zr.Read(p)
	d.n += int64(n)
	return n, err
}

func (d *cappedGzip) Reset(r io.Reader) error { d.n = 0; return d.zr.Reset(r) }
func (d *cappedGzip) Close() error            { return d.zr.Close() }

// guard wraps the API's handler: first the body's size and read deadline
// for every call but AppendSession (whose messages are bounded one by one
// and whose stream lives as long as its producer), then authentication
// from the headers, before any body is read, and the per-token session
// limit (when Config.Auth is set).
func (s *Server) guard(next http.Handler) http.Handler {
	l := s.cfg.Limits.withDefaults()
	if s.cfg.Auth != nil {
		next = auth.Middleware(s.cfg.Auth, l.limitSessions(next))
	}
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != strandv1connect.StrandServiceAppendSessionProcedure {
			if r.ContentLength > l.MaxBodyBytes {
				if r.ProtoMajor == 1 {
					w.Header().Set("Connection", "close") // do not drain the body
				}
				_ = ew.Write(w, r, connect.NewError(connect.CodeResourceExhausted,
					fmt.Errorf("%w: the body is %d bytes (at most %d)", ErrTooLarge, r.ContentLength, l.MaxBodyBytes)))
				return
			}
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Now().Add(l.BodyTimeout))
			r.Body = &deadlineBody{ReadCloser: http.MaxBytesReader(w, r.Body, l.MaxBodyBytes), rc: rc}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody clears the connection's read deadline once the body is read
// to its end: the deadline bounds the body, not the call (an HTTP/1 server
// cancels a call whose connection's background read times out).
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// NewHTTPServer returns the API's HTTP server (HTTP/1.1 and HTTP/2, with
// and without TLS) with bounded headers, idle connections and streams per
// connection. Bodies are bounded by the handler (Limits).
func NewHTTPServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		Protocols:         new(http.Protocols),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: DefaultMaxConcurrentStreams},
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv
}

// LimitListener returns a listener that holds at most n connections open
// (n <= 0: DefaultMaxConns); Accept waits for one to close.
func LimitListener(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		n = DefaultMaxConns
	}
	return &limitListener{Listener: ln, sem: make(chan struct{}, n)}
}

type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// sessions counts the open sessions (AppendSession, ReadSession) of each
// token and refuses one past Limits.MaxSessionsPerToken.
type sessions struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (ss *sessions) admit(key string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.open[key] >= ss.max {
		return false
	}
	ss.open[key]++
	return true
}

func (ss *sessions) release(key string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.open[key]--; ss.open[key] <= 0 {
		delete(ss.open, key)
	}
}

// limitSessions wraps next (inside authentication, which stored the grant)
// with the per-token session limit.
func (l Limits) limitSessions(next http.Handler) http.Handler {
	ss := &sessions{max: l.MaxSessionsPerToken, open: map[string]int{}}
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, ok := auth.FromContext(r.Context())
		if !ok || (r.URL.Path != strandv1connect.StrandServiceAppendSessionProcedure && r.URL.Path != strandv1connect.StrandServiceReadSessionProcedure) {
			next.ServeHTTP(w, r)
			return
		}
		if !ss.admit(g.Hash) {
			_ = ew.Write(w, r, connect.NewError(connect.CodeResourceExhausted,
				fmt.Errorf("%w: token %.8s... already has %d sessions open on this server (the limit); close one or use another token", ErrTooMany, g.Hash, l.MaxSessionsPerToken)))
			return
		}
		defer ss.release(g.Hash)
		next.ServeHTTP(w, r)
	})
}
