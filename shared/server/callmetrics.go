package server

import (
	"context"
	"sync"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metrics"
)

// Per-call series (docs/operations.md, metrics). The procedure label is the
// method's name (Append, ReadSession, ...): one of the service's fixed
// methods, never a caller's string.
const (
	callsName    = "strand_calls_total"
	callsHelp    = "API calls finished, by procedure (method name) and Connect code (ok: success); a session counts when it ends."
	secondsName  = "strand_call_seconds"
	secondsHelp  = "Unary API call latency, by procedure: from the call's admission to its handler's answer (sessions: strand_sessions_open)."
	sessionsName = "strand_sessions_open"
	sessionsHelp = "Open AppendSession and ReadSession streams."
)

// callMetrics is the interceptor that counts every call of the service by
// procedure and code, times unary calls and counts open sessions. It is
// the outermost interceptor: calls refused by the drain or for the token's
// rights count too, and so do those requireOp refuses from the headers
// before Connect (refused). Other calls refused before Connect (guard in
// limits.go: a missing or bad token, sizes, slow bodies, session caps, bad
// HTTP) and the tooling (health, reflection) are not counted.
type callMetrics struct {
	reg   *metrics.Registry
	clk   clock.Clock
	procs map[string]*procMetrics // by procedure path; fixed once built
}

// procMetrics are one procedure's series, made at its first call (ok,
// seconds) or up front (open), so that a call after the first allocates
// nothing for its metrics.
type procMetrics struct {
	name string
	once sync.Once
	ok   *metrics.Counter
	secs *metrics.Histogram // unary only
	open *metrics.Gauge     // sessions only
}

func newCallMetrics(reg *metrics.Registry, clk clock.Clock) *callMetrics {
	m := &callMetrics{reg: reg, clk: clk, procs: map[string]*procMetrics{}}
	svc := strandv1.File_strand_v1_strand_proto.Services().ByName("StrandService")
	for i, ms := 0, svc.Methods(); i < ms.Len(); i++ {
		md := ms.Get(i)
		p := &procMetrics{name: string(md.Name())}
		if md.IsStreamingClient() || md.IsStreamingServer() {
			p.open = reg.Gauge(sessionsName, sessionsHelp, "procedure", p.name)
		}
		m.procs["/"+string(svc.FullName())+"/"+p.name] = p
	}
	return m
}

// done counts a finished call of p with err, and its latency in seconds
// when p is unary.
func (m *callMetrics) done(p *procMetrics, err error, seconds float64) {
	p.once.Do(func() {
		p.ok = m.reg.Counter(callsName, callsHelp, "procedure", p.name, "code", "ok")
		if p.open == nil {
			p.secs = m.reg.Histogram(secondsName, secondsHelp, metrics.LatencyBuckets, "procedure", p.name)
		}
	})
	if p.secs != nil {
		p.secs.Observe(seconds)
	}
	if err == nil {
		p.ok.Inc()
		return
	}
	// Errors are rarer: their series are looked up by code each time.
	m.reg.Counter(callsName, callsHelp, "procedure", p.name, "code", connect.CodeOf(err).String()).Inc()
}

// refused counts a call of the procedure at path refused with err before
// Connect saw it (requireOp), timed as taking no time.
func (m *callMetrics) refused(path string, err error) {
	if p := m.procs[path]; p != nil {
		m.done(p, err, 0)
	}
}

func (m *callMetrics) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		p := m.procs[req.Spec().Procedure]
		if p == nil {
			return next(ctx, req)
		}
		start := m.clk.Now()
		res, err := next(ctx, req)
		m.done(p, err, m.clk.Now().Sub(start).Seconds())
		return res, err
	}
}

func (m *callMetrics) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (m *callMetrics) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		p := m.procs[conn.Spec().Procedure]
		if p == nil || p.open == nil {
			return next(ctx, conn)
		}
		p.open.Add(1)
		defer p.open.Add(-1)
		err := next(ctx, conn)
		m.done(p, err, 0)
		return err
	}
}
