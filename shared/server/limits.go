package server

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/auth"
)

// Limits bound what one request may cost the server. The largest legal
// request is an Append of 1 MiB metered (format.MaxBatchMeteredBytes, at
// most format.MaxBatchBytes encoded): about 1.4 MiB as protobuf, about
// 3 MiB as JSON when a batch holds its 65,535 one-byte headers and
// every field spelled out (base64, field names): the default message
// limit, 6 MiB, sits above both.
type Limits struct {
	// MaxMessageBytes bounds one Append or AppendSession message, as
	// received and after decompression (0: DefaultMaxMessageBytes).
	// Larger is ResourceExhausted. Other procedures: MaxSmallMessageBytes.
	MaxMessageBytes int
	// MaxBodyBytes bounds the HTTP body of an Append, compressed or not
	// (0: MaxMessageBytes + 64 KiB for framing); other unary calls'
	// bodies are bounded by MaxSmallMessageBytes + 4 KiB.
	MaxBodyBytes int64
	// BodyTimeout bounds reading the body of every call but AppendSession,
	// from the end of its headers (0: DefaultBodyTimeout). A body that
	// trickles in slower is cut off.
	BodyTimeout time.Duration
	// WriteTimeout bounds each write of a response, at most writeChunk
	// bytes (64 KiB), and each flush (0: DefaultWriteTimeout): a client
	// that takes none of a chunk for this long (a full socket, an HTTP/2
	// window it does not grant) is cut off, its call ended and what it
	// held released (writebound.go). A reader that keeps taking bytes is
	// never cut off: the deadline is renewed before every chunk.
	WriteTimeout time.Duration
	// MaxSmallMessageBytes bounds one request message of every procedure
	// but Append and AppendSession, whose largest legal message is tens of
	// bytes to a few KiB (0: DefaultMaxSmallMessageBytes).
	MaxSmallMessageBytes int
	// MaxDecodingBytes bounds the request bodies of unary calls being read
	// and decoded at once on this server, by their declared length (or
	// their procedure's body limit when they declare none), and the
	// AppendSession messages being read (stream_budget.go), plus, for an
	// append, an upper bound of what decoding it allocates, taken before
	// it is decoded (decode_budget.go; capped at the tenant's share, so
	// the largest legal append always fits); one tenant holds at most half
	// of it. A call past it is ResourceExhausted at once, before its body
	// is read or decoded; a session's message waits up to DecodeWait first
	// (0: DefaultMaxDecodingBytes).
	MaxDecodingBytes int64
	// DecodeWait is how long an AppendSession message waits for room in
	// the decoding budget before its session ends ResourceExhausted (0:
	// DefaultDecodeWait).
	DecodeWait time.Duration
	// SessionRecheck is how often an open session's token is checked again
	// (0: DefaultSessionRecheck): a session whose token (or an ancestor)
	// was revoked or expired ends with Unauthenticated. A revocation on
	// another server is seen within the checker's TTL after that.
	SessionRecheck time.Duration
	// MaxSessionsPerToken bounds the sessions (AppendSession and
	// ReadSession) one tenant (a root token and every token minted under
	// it; the name is older) holds open on this server (0:
	// DefaultMaxSessionsPerToken); past it a session is ResourceExhausted.
	// It applies with authentication only, and is at most half of
	// MaxSessions.
	MaxSessionsPerToken int
	// MaxSessions bounds the sessions open on this server, all tenants
	// (and, without authentication, all callers) together (0:
	// DefaultMaxSessions); past it a session is ResourceExhausted. The
	// connections and their HTTP/2 streams would allow 102,400.
	MaxSessions int
	// MaxStreamsPerTenant bounds the active streams of one tenant, counted
	// under its root token's prefix when it creates one (quota.go; 0:
	// unlimited, the default). With authentication only.
	MaxStreamsPerTenant int
	// AppendBytesPerSecPerTenant bounds the metered bytes one tenant
	// appends a second on this server (quota.go; 0: unlimited, the
	// default), with a burst of AppendBurstBytesPerTenant (at least one
	// second's and the largest batch, 1 MiB). With authentication only.
	AppendBytesPerSecPerTenant int64
	AppendBurstBytesPerTenant  int64
}

// Defaults of Limits and of NewHTTPServer.
const (
	DefaultMaxMessageBytes      = 6 << 20
	DefaultMaxSmallMessageBytes = 64 << 10
	DefaultMaxDecodingBytes     = 64 << 20
	DefaultDecodeWait           = 5 * time.Second
	DefaultBodyTimeout          = 30 * time.Second
	DefaultWriteTimeout         = 30 * time.Second
	DefaultMaxSessionsPerToken  = 1000
	DefaultMaxSessions          = 10_000
	DefaultSessionRecheck       = time.Second
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection idle this long.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's headers (and URL).
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConcurrentStreams bounds the HTTP/2 streams (calls) of one
	// connection.
	DefaultMaxConcurrentStreams = 100
	// DefaultMaxConns bounds the API's open connections (conns.go).
	DefaultMaxConns = 1024
)

func (l Limits) withDefaults() Limits {
	l.MaxMessageBytes = positiveOr(l.MaxMessageBytes, DefaultMaxMessageBytes)
	l.MaxSmallMessageBytes = positiveOr(l.MaxSmallMessageBytes, DefaultMaxSmallMessageBytes)
	l.MaxDecodingBytes = positiveOr(l.MaxDecodingBytes, DefaultMaxDecodingBytes)
	l.DecodeWait = positiveOr(l.DecodeWait, DefaultDecodeWait)
	l.MaxBodyBytes = positiveOr(l.MaxBodyBytes, int64(l.MaxMessageBytes)+64<<10)
	l.BodyTimeout = positiveOr(l.BodyTimeout, DefaultBodyTimeout)
	l.WriteTimeout = positiveOr(l.WriteTimeout, DefaultWriteTimeout)
	l.SessionRecheck = positiveOr(l.SessionRecheck, DefaultSessionRecheck)
	l.MaxSessionsPerToken = positiveOr(l.MaxSessionsPerToken, DefaultMaxSessionsPerToken)
	l.MaxSessions = positiveOr(l.MaxSessions, DefaultMaxSessions)
	return l
}

// positiveOr is v, or d when v is not positive (a limit left unset).
func positiveOr[T int | int64 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// Sentinel errors of the limits.
var (
	// ErrTooLarge: a request message or body over its limit.
	ErrTooLarge = errors.New("server: request too large")
	// ErrBusy: the server's decoding budget is spent; a retry may pass.
	ErrBusy = errors.New("server: busy")
	// ErrTooMany: a tenant over its session limit, or the server at its
	// own.
	ErrTooMany = errors.New("server: too many sessions")
)

// handlerOptions bound every message the Connect handler reads: its size as
// received and once decompressed. Connect's own gzip decompressor would, on
// a message over the limit, inflate the rest only to report its size (a
// 4 MB bomb costs seconds of CPU); this one stops at the limit.
func (l Limits) handlerOptions(maxMsg int) []connect.HandlerOption {
	limit := int64(maxMsg) + 1 // Connect reads one byte past its limit to detect the excess
	return []connect.HandlerOption{
		connect.WithReadMaxBytes(maxMsg),
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

// guard wraps the API's handler: first a request the API does not speak
// is answered with what to send (requireAPIRequest); then, when
// Config.Auth is set, authentication from the headers, the operation the
// procedure needs (requireOp) and the per-tenant session limit, all before
// any body is read (reflection and health skip them); then the body's
// size, read deadline and share of the decoding budget (limitBody).
func (s *Server) guard(next http.Handler, calls *callMetrics) http.Handler {
	l := s.cfg.Limits.withDefaults()
	next = l.limitBody(next)
	if s.cfg.Auth != nil {
		open, authed := next, auth.Middleware(s.cfg.Auth, authenticated(requireOp(calls, l.limitSessions(s.watchGrant(next)))))
		next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isTooling(r.URL.Path) {
				open.ServeHTTP(w, r)
				return
			}
			authed.ServeHTTP(w, r)
		})
	} else {
		next = authenticated(l.limitSessions(next)) // every call may do everything; sessions counted
	}
	return requireAPIRequest(next)
}

// authenticated marks the call's connection as authenticated and charges
// it to the call's tenant (conns.go): auth.Middleware let the call
// through. A tenant at its share of connections has the call refused
// (resource_exhausted) before its body is read.
func authenticated(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, _ := auth.FromContext(r.Context())
		if err := markAuthenticated(r.Context(), g.Tenant); err != nil {
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close") // do not drain the body
			}
			_ = ew.Write(w, r, connect.NewError(connect.CodeResourceExhausted, err))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitBody bounds the body of every call but AppendSession: its size (the
// procedure's message limit and framing), its read time, and its share of
// the bytes being decoded at once. An AppendSession's stream lives as long
// as its producer: its messages are bounded one by one, and each is
// charged to the same budget while it is read and decoded (streamBudget).
func (l Limits) limitBody(next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	budget := &budget{max: l.MaxDecodingBytes, held: map[string]int64{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, _ := auth.FromContext(r.Context())
		if r.URL.Path == strandv1connect.StrandServiceAppendSessionProcedure {
			sb := &streamBudget{ReadCloser: r.Body, share: share{b: budget, tenant: g.Tenant, wait: l.DecodeWait}, max: int64(l.MaxMessageBytes),
				sniff: sessionSniffer(r)} // each message's stream before its rest (sniff.go)
			defer sb.done()
			r.Body = sb
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), budgetKey{}, held(sb))))
			return
		}
		refuse := func(err error) {
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close") // do not drain the body
			}
			_ = ew.Write(w, r, connect.NewError(connect.CodeResourceExhausted, err))
		}
		max := l.bodyLimit(r.URL.Path)
		if r.ContentLength > max {
			refuse(fmt.Errorf("%w: the body is %d bytes (at most %d for %s)", ErrTooLarge, r.ContentLength, max, r.URL.Path))
			return
		}
		weight := max
		if r.ContentLength >= 0 {
			weight = r.ContentLength
		}
		if err := budget.take(g.Tenant, weight); err != nil {
			refuse(err)
			return
		}
		hb := &share{b: budget, tenant: g.Tenant, n: weight}
		defer hb.done()
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(l.BodyTimeout))
		r.Body = &deadlineBody{ReadCloser: http.MaxBytesReader(w, r.Body, max), rc: rc, r: r}
		if r.URL.Path == strandv1connect.StrandServiceAppendProcedure {
			// The stream before the rest of the body (sniff.go).
			var err error
			if r, err = authorizeSniffed(r); err != nil {
				if r.ProtoMajor == 1 {
					w.Header().Set("Connection", "close") // do not drain the body
				}
				_ = ew.Write(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), budgetKey{}, held(hb))))
	})
}

// bodyLimit is the largest body of a call of procedure path.
func (l Limits) bodyLimit(path string) int64 {
	if path == strandv1connect.StrandServiceAppendProcedure {
		return l.MaxBodyBytes
	}
	return int64(l.MaxSmallMessageBytes) + 4<<10 // framing
}

// budget counts the bytes of request bodies being read and decoded, in
// all and per tenant: a tenant holds at most half of it, so one tenant's
// requests never take it all from the others.
type budget struct {
	mu       sync.Mutex
	max, cur int64
	held     map[string]int64 // by tenant
}

// take takes n bytes for tenant, or fails with ErrBusy saying which bound
// is reached.
func (b *budget) take(tenant string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur+n > b.max {
		return fmt.Errorf("%w: the server is reading and decoding %d of its %d bytes of requests at once; retry", ErrBusy, b.cur, b.max)
	}
	if b.held[tenant]+n > b.max/2 {
		return fmt.Errorf("%w: this tenant's requests being read and decoded hold %d bytes, its share is half the server's %d; retry", ErrBusy, b.held[tenant], b.max)
	}
	b.cur += n
	b.held[tenant] += n
	return nil
}

// fit caps n, a call's decoding charge, at what its tenant's share leaves
// the call beyond the held it holds already: a legal append decoding to
// more than a tenant's share (raw JSON of 65,535 headers, about 84 MiB)
// still runs when its tenant holds nothing else, charged the share, so
// such calls are at most two at once.
func (b *budget) fit(n, held int64) int64 { return max(0, min(n, b.max/2-held)) }

func (b *budget) put(tenant string, n int64) {
	b.mu.Lock()
	b.cur -= n
	if b.held[tenant] -= n; b.held[tenant] <= 0 {
		delete(b.held, tenant)
	}
	b.mu.Unlock()
}

// procedures are the API's procedures (the StrandService methods).
func procedures() []string {
	ms := strandv1.File_strand_v1_strand_proto.Services().ByName("StrandService").Methods()
	out := make([]string, ms.Len())
	for i := range ms.Len() {
		out[i] = "/" + strandv1connect.StrandServiceName + "/" + string(ms.Get(i).Name())
	}
	return out
}

// procedureOps are the operations that let a token call a procedure (any
// one of them; admin covers all): a token with none is refused before its
// body is read. Which stream it may touch is checked once the body names
// it.
var procedureOps = map[string][]auth.Op{
	strandv1connect.StrandServiceAppendProcedure:            {auth.Append},
	strandv1connect.StrandServiceAppendSessionProcedure:     {auth.Append},
	strandv1connect.StrandServiceFenceProcedure:             {auth.Fence},
	strandv1connect.StrandServiceTrimProcedure:              {auth.Trim},
	strandv1connect.StrandServiceReadProcedure:              {auth.Read},
	strandv1connect.StrandServiceReadSessionProcedure:       {auth.Read},
	strandv1connect.StrandServiceGetStreamProcedure:         {auth.Read},
	strandv1connect.StrandServiceListStreamsProcedure:       {auth.Read},
	strandv1connect.StrandServiceCheckTailProcedure:         {auth.Read, auth.Append},
	strandv1connect.StrandServiceCreateStreamProcedure:      {auth.Admin},
	strandv1connect.StrandServiceDeleteStreamProcedure:      {auth.Admin},
	strandv1connect.StrandServiceReconfigureStreamProcedure: {auth.Admin},
	strandv1connect.StrandServiceMoveStreamProcedure:        {auth.Admin},
	strandv1connect.StrandServiceCreateTokenProcedure:       {auth.Admin},
	strandv1connect.StrandServiceRevokeTokenProcedure:       {auth.Admin},
	strandv1connect.StrandServiceListTokensProcedure:        {auth.Admin},
}

// requireOp refuses, PermissionDenied and before the body is read, a call
// whose token holds none of the operations its procedure needs; calls
// counts the refusal as the Connect interceptor counts the rest.
func requireOp(calls *callMetrics, next http.Handler) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ops, known := procedureOps[r.URL.Path]
		g, ok := auth.FromContext(r.Context())
		if !known || !ok || slices.ContainsFunc(ops, g.Can) {
			next.ServeHTTP(w, r)
			return
		}
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close") // do not drain the body
		}
		err := connect.NewError(connect.CodePermissionDenied,
			fmt.Errorf("%w: %s needs a token with the %s operation", auth.ErrDenied, r.URL.Path, opNames(ops)))
		calls.refused(r.URL.Path, err)
		_ = ew.Write(w, r, err)
	})
}

func opNames(ops []auth.Op) string {
	s := make([]string, len(ops))
	for i, op := range ops {
		s[i] = string(op)
	}
	return strings.Join(s, " or ")
}

// deadlineBody clears the connection's read deadline once the body is read
// to its end: the deadline bounds the body, not the call (an HTTP/1 server
// cancels a call whose connection's background read times out).
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	r    *http.Request
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, badFraming(b.r, err)
}

// NewHTTPServer returns the API's HTTP server (HTTP/1.1 and HTTP/2, with
// and without TLS) with bounded headers, idle connections and streams per
// connection, and an HTTP/2 connection closed when no byte of it can be
// written for l.WriteTimeout (WriteByteTimeout: a client that takes no
// frame; the handler's chunks are bounded by it too). Bodies and response
// writes are bounded by the handler (Limits); l is the Server's Limits.
func NewHTTPServer(h http.Handler, l Limits) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		Protocols:         new(http.Protocols),
		ConnContext:       connContext, // the call's connection, marked once a call authenticates (conns.go); its unsent bytes bounded (writebound.go)
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: DefaultMaxConcurrentStreams, WriteByteTimeout: l.withDefaults().WriteTimeout},
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return srv
}

// sessions counts the open sessions (AppendSession, ReadSession): all of
// them, refused past Limits.MaxSessions, and each tenant's, refused past
// its share (perTenant).
type sessions struct {
	max, perTenant int
	mu             sync.Mutex
	total          int
	open           map[string]int
}

// newSessions counts sessions under l: a tenant's share is
// MaxSessionsPerToken, and at most half of MaxSessions (as the Kafka
// front end's held budget), so that one tenant never fills the server.
func newSessions(l Limits) *sessions {
	return &sessions{max: l.MaxSessions, perTenant: min(l.MaxSessionsPerToken, max(l.MaxSessions/2, 1)), open: map[string]int{}}
}

// admit counts one more session of tenant ("": no authentication, counted
// in the total only), or says why it is refused (ErrTooMany).
func (ss *sessions) admit(tenant string) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if tenant != "" && ss.open[tenant] >= ss.perTenant {
		return fmt.Errorf("%w: tenant %.8s... (the tokens under one root token) already has %d sessions open on this server (the limit); close one", ErrTooMany, tenant, ss.perTenant)
	}
	if ss.total >= ss.max {
		return fmt.Errorf("%w: this server already has %d sessions open, all tenants together (the limit); retry later or on another star", ErrTooMany, ss.max)
	}
	ss.total++
	if tenant != "" {
		ss.open[tenant]++
	}
	return nil
}

func (ss *sessions) release(tenant string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.total--
	if tenant == "" {
		return
	}
	if ss.open[tenant]--; ss.open[tenant] <= 0 {
		delete(ss.open, tenant)
	}
}

func isSession(path string) bool {
	return path == strandv1connect.StrandServiceAppendSessionProcedure || path == strandv1connect.StrandServiceReadSessionProcedure
}

// limitSessions wraps next (inside authentication, which stored the grant,
// when there is one) with the session limits: the server's, and each
// tenant's share. A tenant is a root token and every token minted under it
// (auth.Grant.Tenant), so minting tokens does not multiply it.
func (l Limits) limitSessions(next http.Handler) http.Handler {
	ss := newSessions(l)
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isSession(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		g, _ := auth.FromContext(r.Context())
		if err := ss.admit(g.Tenant); err != nil {
			_ = ew.Write(w, r, connect.NewError(connect.CodeResourceExhausted, err))
			return
		}
		defer ss.release(g.Tenant)
		next.ServeHTTP(w, r)
	})
}

// errSessionEnded is the cause of a session's context ended because its
// token is void (revoked or expired, or an ancestor is).
type errSessionEnded struct{ err error }

func (e errSessionEnded) Error() string { return "server: session ended: " + e.err.Error() }
func (e errSessionEnded) Unwrap() error { return e.err }

// watchGrant checks a session's token again every Limits.SessionRecheck
// and ends the session (its context, with errSessionEnded as the cause)
// once the token or an ancestor is revoked or expired, or unknown.
func (s *Server) watchGrant(next http.Handler) http.Handler {
	every := s.cfg.Limits.withDefaults().SessionRecheck
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isSession(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		token, source := auth.Bearer(r.Header.Get("Authorization")), auth.Source(r.RemoteAddr)
		go func() {
			// A wall-clock ticker, not Config.Clock: a manual clock's After
			// fires at once, and this loop would spin.
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				_, err := s.cfg.Auth.CheckFrom(ctx, token, source)
				if errors.Is(err, auth.ErrRevoked) || errors.Is(err, auth.ErrExpired) || errors.Is(err, auth.ErrUnauthenticated) {
					s.log.Info("session ended: its token is void", "path", r.URL.Path, "why", err)
					cancel(errSessionEnded{err})
					return
				}
			}
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// sessionEnded is the Unauthenticated error of a session ended by
// watchGrant, or nil.
func sessionEnded(ctx context.Context) error {
	var e errSessionEnded
	if errors.As(context.Cause(ctx), &e) {
		return connect.NewError(connect.CodeUnauthenticated, e)
	}
	return nil
}
