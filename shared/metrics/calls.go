package metrics

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// The API's series, per procedure (the method name: "Append"):
//
//	strand_calls_total{procedure,code}   calls ended, by code ("ok" or the Connect code)
//	strand_call_seconds{procedure}       call duration (a session's: its whole life)
//	strand_sessions{procedure}           streaming calls open now
//	strand_read_records_total            records answered by Read and ReadSession
//	strand_read_bytes_total              their bodies' bytes
//
// A procedure's series are made at its first call; after that a call
// costs a sync.Map load, a clock read and a few atomic adds, no
// allocation (TestCallInterceptorAllocs).

// codes is every Connect code plus "ok" (slot 0).
const codes = 17

// callSeries are one procedure's series.
type callSeries struct {
	r        *Registry
	name     string
	seconds  *Histogram
	sessions *Gauge
	byCode   [codes]atomic.Pointer[Counter]
}

// count adds one call ended with err.
func (c *callSeries) count(err error) {
	i := 0
	if err != nil {
		i = int(connect.CodeOf(err)) // 1..16
		if i <= 0 || i >= codes {
			i = int(connect.CodeUnknown)
		}
	}
	ctr := c.byCode[i].Load()
	if ctr == nil {
		code := "ok"
		if i > 0 {
			code = connect.Code(i).String()
		}
		ctr = c.r.Counter("strand_calls_total", "API calls ended, by procedure and code (ok, or the Connect code).", "procedure", c.name, "code", code)
		c.byCode[i].Store(ctr)
	}
	ctr.Inc()
}

// callsOf returns procedure's series, making them at its first call. The
// map is copied on write (a procedure is added once), so a lookup is a
// plain map read: no lock, no allocation.
func (r *Registry) callsOf(procedure string) *callSeries {
	if m := r.procs.Load(); m != nil {
		if c := (*m)[procedure]; c != nil {
			return c
		}
	}
	r.procMu.Lock()
	defer r.procMu.Unlock()
	old := map[string]*callSeries{}
	if m := r.procs.Load(); m != nil {
		if c := (*m)[procedure]; c != nil {
			return c
		}
		old = *m
	}
	name := procedure[strings.LastIndexByte(procedure, '/')+1:]
	c := &callSeries{r: r, name: name,
		seconds:  r.Histogram("strand_call_seconds", "API call duration; a streaming call's is its whole life.", LatencyBuckets, "procedure", name),
		sessions: r.Gauge("strand_sessions", "Streaming API calls open now.", "procedure", name)}
	next := make(map[string]*callSeries, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[procedure] = c
	r.procs.Store(&next)
	return c
}

// CallInterceptor counts the API's calls by procedure and code, times
// them, counts open sessions and the records reads answer. Put it first,
// so it sees the code of every refusal the other interceptors make.
func (r *Registry) CallInterceptor() connect.Interceptor { return callInterceptor{r} }

type callInterceptor struct{ r *Registry }

func (ci callInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		c := ci.r.callsOf(req.Spec().Procedure)
		start := time.Now()
		res, err := next(ctx, req)
		c.seconds.Observe(time.Since(start).Seconds())
		c.count(err)
		if err == nil && res != nil {
			if m, ok := res.Any().(*strandv1.ReadResponse); ok {
				ci.r.reads(m.Records)
			}
		}
		return res, err
	}
}

func (callInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (ci callInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		c := ci.r.callsOf(conn.Spec().Procedure)
		c.sessions.Add(1)
		start := time.Now()
		err := next(ctx, readCounter{conn, ci.r})
		c.sessions.Add(-1)
		c.seconds.Observe(time.Since(start).Seconds())
		c.count(err)
		return err
	}
}

// readCounter counts the records a ReadSession sends.
type readCounter struct {
	connect.StreamingHandlerConn
	r *Registry
}

func (rc readCounter) Send(m any) error {
	err := rc.StreamingHandlerConn.Send(m)
	if err == nil {
		if msg, ok := m.(*strandv1.ReadSessionResponse); ok {
			rc.r.reads(msg.Records)
		}
	}
	return err
}

// reads counts records answered to a reader.
func (r *Registry) reads(recs []*strandv1.SequencedRecord) {
	if len(recs) == 0 {
		return
	}
	var n uint64
	for _, rec := range recs {
		n += uint64(len(rec.Body))
	}
	r.readRecords.Add(uint64(len(recs)))
	r.readBytes.Add(n)
}
