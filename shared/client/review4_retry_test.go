package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
)

// review4: a call that is not idempotent (CreateStream, CreateToken,
// RevokeToken) is not sent again when the connection drops after the
// server read it and before it answered (the server may have done it: a
// second token minted). The drop here is the common one: the server
// closes the connection without a response, which connect-go reports as
// Unavailable straight from the HTTP client (EOF), not as a truncated
// message.
func TestReview4NotIdempotentNotResentAfterDrop(t *testing.T) {
	for name, call := range map[string]func(c *Client) error{
		"CreateStream": func(c *Client) error {
			_, err := c.CreateStream(context.Background(), "s", CreateOptions{})
			return err
		},
		"CreateToken": func(c *Client) error {
			_, _, err := c.CreateToken(context.Background(), TokenSpec{Prefix: "a/", Ops: []string{"read"}})
			return err
		},
		"RevokeToken": func(c *Client) error { return c.RevokeToken(context.Background(), "00") },
	} {
		t.Run(name, func(t *testing.T) {
			var got atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// The server reads the call whole (and would do it).
				if _, err := io.Copy(io.Discard, r.Body); err == nil && strings.HasSuffix(r.URL.Path, "/"+name) {
					got.Add(1)
				}
				// The call was read (and done); the answer is lost.
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
			}))
			defer srv.Close()
			c, err := New(srv.URL, WithHTTPClient(srv.Client()), WithRetry(Retry{MaxAttempts: 5, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxElapsed: 5 * time.Second}))
			if err != nil {
				t.Fatal(err)
			}
			err = call(c)
			if err == nil {
				t.Fatal("a call whose connection dropped succeeded")
			}
			if n := got.Load(); n != 1 {
				t.Fatalf("%s sent %d times after its connection dropped mid-call, want once (not idempotent): %v", name, n, err)
			}
		})
	}
}

// refusingStar answers CheckTail and refuses every AppendSession at once
// (a server at its sessions cap: resource_exhausted), counting them.
type refusingStar struct {
	fakeStar
	sessions atomic.Int32
}

func (f *refusingStar) AppendSession(context.Context, *connect.BidiStream[strandv1.AppendRequest, strandv1.AppendResponse]) error {
	f.sessions.Add(1)
	return connect.NewError(connect.CodeResourceExhausted, errors.New("server: too many sessions: this server already has 1 sessions open"))
}

// review4: a producer session whose server refuses its sessions
// (resource_exhausted, retriable) reconnects with the client's backoff,
// not as fast as the round trip: at the sessions cap every producer
// would otherwise hammer the server with CheckTail and a new session
// (and its pending batches) in a tight loop, for ever.
func TestReview4ProducerReconnectBacksOff(t *testing.T) {
	f := &refusingStar{}
	_, h := strandv1connect.NewStrandServiceHandler(f)
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	c, err := New(srv.URL, WithHTTPClient(srv.Client()), WithRetry(Retry{MaxAttempts: 100, BaseDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond, MaxElapsed: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := c.OpenProducerSession(ctx, "s", ProducerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Append([]Record{{Body: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	// With backoff from 20 ms doubling to 100 ms: about 8 in 500 ms.
	if n := f.sessions.Load(); n > 15 {
		t.Fatalf("%d sessions opened in 500 ms against a server refusing them, want the client's backoff (about 8)", n)
	}
}

// echoingStar answers CheckTail with a server error that quotes the
// stream's name, counting the calls.
type echoingStar struct {
	fakeStar
	calls atomic.Int32
}

func (f *echoingStar) CheckTail(_ context.Context, req *connect.Request[strandv1.CheckTailRequest]) (*connect.Response[strandv1.CheckTailResponse], error) {
	f.calls.Add(1)
	return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("check tail of stream %q: the metastore's answer is malformed", req.Msg.Stream))
}

// review4: the server's own error is never taken for a lost connection
// because its message, which may quote a name the caller chose, reads
// like one ("connection reset by peer" as a stream name): an internal
// error is not retried.
func TestReview4ServerErrorNotALostConnection(t *testing.T) {
	f := &echoingStar{}
	_, h := strandv1connect.NewStrandServiceHandler(f)
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := New(srv.URL, WithHTTPClient(srv.Client()), WithRetry(Retry{MaxAttempts: 5, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxElapsed: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CheckTail(context.Background(), "a/connection reset by peer")
	if connect.CodeOf(err) != connect.CodeInternal || errors.Is(err, ErrConnectionLost) {
		t.Fatalf("a server's internal error quoting the stream: %v, want internal", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("a server's internal error was sent %d times, want once (not retriable)", n)
	}
}
