package client

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// Retry is the client's retry budget for retriable errors (see Retriable).
// The zero Retry means DefaultRetry; MaxAttempts 1 disables retries.
type Retry struct {
	// MaxAttempts bounds the attempts of one call (first try included).
	MaxAttempts int
	// MaxElapsed bounds the time one call spends retrying.
	MaxElapsed time.Duration
	// BaseDelay is the first backoff; each retry doubles it up to MaxDelay,
	// with full jitter (a uniform draw in [delay/2, delay)).
	BaseDelay, MaxDelay time.Duration
}

// DefaultRetry rides through a star restart or a takeover (a few seconds
// to tens of seconds).
var DefaultRetry = Retry{MaxAttempts: 100, MaxElapsed: 60 * time.Second, BaseDelay: 50 * time.Millisecond, MaxDelay: 2 * time.Second}

// WithRetry sets the retry budget (Retry{MaxAttempts: 1}: no retries). A
// client given one retries refused dials from its first call (it may be
// waiting for a server that is starting); one without fails at once while
// it has never reached a server (see retrying).
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = r } }

// WithoutIdempotence turns off the automatic producer ids: Append is then
// retried only on errors that prove nothing was written (Unavailable),
// never on outcome-unknown (Aborted).
func WithoutIdempotence() Option { return func(c *Client) { c.noIdem = true } }

func (c *Client) retryPolicy() Retry {
	if c.retry == (Retry{}) {
		return DefaultRetry
	}
	return c.retry
}

// Retriable reports whether err may succeed on a retry, as docs/api.md's
// error table says: Unavailable (the server or its stores are down,
// restarting or not the leader; also a connection that dropped
// mid-request), Aborted (only appends answer it: the outcome is unknown;
// retry only with the same producer id and batch seq, which the client
// does),
// and ResourceExhausted but for a request over a size limit or a tenant
// at its stream quota (the server is busy, a session or lookup limit or
// the tenant's append byte rate is reached: nothing was done; retry
// later). Every other code is not retriable: the same request gets the
// same answer (invalid argument, not found, already exists, failed
// precondition, permission, unauthenticated, data loss, internal, a
// request too large, a stream quota).
func Retriable(err error) bool {
	err = transportError(err)
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeAborted:
		return true
	case connect.CodeResourceExhausted:
		return !tooLarge(err)
	}
	return false
}

// tooLarge reports a ResourceExhausted refusal no retry can pass: a
// request message or body over the server's limit (the server's
// "request too large", Connect's "larger than configured max"), or a
// CreateStream of a tenant at its stream quota ("stream quota exceeded":
// it passes only once the tenant deletes a stream).
func tooLarge(err error) bool {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	m := ce.Message()
	return strings.Contains(m, "request too large") || strings.Contains(m, "larger than configured max") || strings.Contains(m, "stream quota exceeded")
}

// ErrConnectionLost: the connection dropped while a call was under way
// (reported as Unavailable). For an append without a producer id the
// outcome is unknown, so the client does not retry it.
var ErrConnectionLost = errors.New("client: connection lost")

// transportError reclassifies a connection that dropped mid-request or
// mid-response: connect-go reports a truncated message as InvalidArgument
// ("protocol error: incomplete envelope: unexpected EOF"), which would say
// "your input is wrong, do not retry". It is Unavailable: the server went
// away. A connection that closed before the answer began (connect-go's
// Unavailable from the HTTP client) is ErrConnectionLost too. Other
// errors are returned as they are.
func transportError(err error) error {
	var ce *connect.Error
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	if ce.Code() == connect.CodeInvalidArgument && (errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(ce.Message(), "incomplete envelope")) {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w mid-message: %s", ErrConnectionLost, ce.Message()))
	}
	// connect-go reports the HTTP client's own failure (the connection
	// closed before any answer: the server may have read and done the
	// call) as Unavailable: lost too, not a refusal.
	// An error the server sent (a wire error) is its own, whatever its
	// message quotes.
	transport := !connect.IsWireError(ce) && (ce.Code() == connect.CodeUnknown || ce.Code() == connect.CodeInternal || ce.Code() == connect.CodeUnavailable)
	if transport && connectionLost(err) {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w: %s", ErrConnectionLost, ce.Message()))
	}
	return err
}

// connectionLost recognises the transport's own failures that connect-go
// passes through as Unknown or Internal: an HTTP/2 stream reset by the
// peer (the server aborted or is going away), a lost or reset connection.
// Only errors that did not come from the server (not wire errors) are
// read so: a server's message may quote anything a caller sent.
func connectionLost(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	m := err.Error()
	for _, s := range []string{"stream error: stream ID", "client connection lost", "connection reset by peer", "http2: server sent GOAWAY", "broken pipe"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// dialFailed reports whether err is a connection that could not be made
// (refused, no route, unknown host): nothing reached the server.
func dialFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// observe notes that the server answered (a success or an error that came
// from it): from then on retrying retries refused dials.
func (c *Client) observe(err error) {
	var ce *connect.Error
	if err == nil || errors.As(err, &ce) && connect.IsWireError(ce) {
		c.reached.Store(true)
	}
}

// backoff returns the delay before retry n (0-based) with jitter.
func (r Retry) backoff(n int) time.Duration {
	d := r.BaseDelay
	for i := 0; i < n && d < r.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, r.MaxDelay)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// retrying runs call until it succeeds, fails with a non-retriable error,
// ctx ends, or the budget is spent. idempotent says an outcome-unknown
// error (Aborted, or a connection lost mid-call) may be retried; reads are
// idempotent too. The error returned is the last one.
//
// A client on the default Retry that has never reached its server does
// not retry a refused dial: at first contact that is a wrong endpoint or
// a stopped server, and waiting out the budget (60 s) only hides it. Once
// any call got an answer, a refused dial is a restart and is retried. A
// client given a Retry (WithRetry) retries as it says from the start: its
// caller may be waiting for a server that is still starting. With several
// endpoints, first contact tries each of them once before it gives up.
func retrying[T any](ctx context.Context, c *Client, idempotent bool, call func() (T, error)) (T, error) {
	r := c.retryPolicy()
	start := time.Now()
	for n := 0; ; n++ {
		res, err := call()
		err = transportError(err)
		if err == nil {
			return res, nil
		}
		if dialFailed(err) && c.retry == (Retry{}) && !c.reached.Load() && n+1 >= c.eps.count() {
			return res, err
		}
		code := connect.CodeOf(err)
		ok := (code == connect.CodeUnavailable && (idempotent || !errors.Is(err, ErrConnectionLost))) || (idempotent && code == connect.CodeAborted) ||
			(code == connect.CodeResourceExhausted && !tooLarge(err)) // refused before anything was done
		// A leader the client will not follow answers the same way again.
		ok = ok && !errors.Is(err, ErrUntrustedLeader)
		if !ok || n+1 >= max(r.MaxAttempts, 1) || time.Since(start) >= r.MaxElapsed {
			return res, err
		}
		t := time.NewTimer(r.backoff(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return res, err
		case <-t.C:
		}
	}
}

// ProducerID is an idempotent producer's id: 16 bytes, not all zero.
type ProducerID [16]byte

// NewProducerID draws a random producer id.
func NewProducerID() ProducerID {
	var p ProducerID
	for p == (ProducerID{}) {
		_, _ = crand.Read(p[:])
	}
	return p
}

// producer is one automatic producer: an id and its next batch seq per
// stream. One call uses it at a time, so its batches are in order.
type producer struct {
	id   ProducerID
	next map[string]uint64
}

// producers pools the client's automatic producers: a call takes one (or
// makes one), and returns it after a success. One that failed is dropped:
// its last batch may or may not be committed, so its sequence is unknown.
type producers struct {
	mu   sync.Mutex
	free []*producer
}

func (p *producers) take() *producer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		pr := p.free[n-1]
		p.free = p.free[:n-1]
		return pr
	}
	return &producer{id: NewProducerID(), next: map[string]uint64{}}
}

func (p *producers) give(pr *producer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, pr)
}
