package client

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"

	"connectrpc.com/connect"
)

// Several endpoints: New takes a comma-separated list (STRAND_ENDPOINT
// may name the leader and its standbys, e.g. `strand dev` and `strand dev
// --standby` on the same data directory). Only one of them serves at a
// time. Calls go to the current endpoint; when a call there fails as a
// process that is not serving fails (Unavailable: connection refused or
// reset, or a draining server), the client moves on to the next endpoint,
// and the retry that follows (Retry) goes there. A stream's leader learnt
// from a Leader detail is kept apart (Client.leaders), as before.

// endpoints is the list and the current one.
type endpoints struct {
	mu   sync.Mutex
	list []string
	cur  int
}

// parseEndpoints normalizes each of a comma-separated list of endpoints.
func parseEndpoints(s string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue // a stray comma
		}
		b, err := normalize(e)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errNoEndpoint
	}
	return out, nil
}

// home is the current endpoint.
func (e *endpoints) home() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.list[e.cur]
}

// count is how many endpoints there are.
func (e *endpoints) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.list)
}

// failed moves past base if it is the current endpoint (a concurrent
// call that failed there first has moved already).
func (e *endpoints) failed(base string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.list[e.cur] == base {
		e.cur = (e.cur + 1) % len(e.list)
	}
}

// notServing reports whether err is how a call to a process that is not
// (or no longer) serving ends. A star that answers with where a stream's
// leader is (a Leader detail) is serving.
func notServing(err error) bool {
	if err == nil || errors.Is(err, io.EOF) || connect.CodeOf(transportError(err)) != connect.CodeUnavailable {
		return false
	}
	_, redirect := LeaderOf(err)
	return !redirect
}

// failoverIntc tells the endpoints when a call to base fails so.
type failoverIntc struct {
	eps  *endpoints
	base string
}

func (f failoverIntc) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if notServing(err) {
			f.eps.failed(f.base)
		}
		return res, err
	}
}

func (f failoverIntc) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		return failoverConn{StreamingClientConn: next(ctx, spec), f: f}
	}
}

func (f failoverIntc) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

type failoverConn struct {
	connect.StreamingClientConn
	f failoverIntc
}

func (c failoverConn) Send(m any) error {
	err := c.StreamingClientConn.Send(m)
	if notServing(err) {
		c.f.eps.failed(c.f.base)
	}
	return err
}

func (c failoverConn) Receive(m any) error {
	err := c.StreamingClientConn.Receive(m)
	if notServing(err) {
		c.f.eps.failed(c.f.base)
	}
	return err
}
