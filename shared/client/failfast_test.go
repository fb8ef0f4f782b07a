package client_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
)

// deadEndpoint is a loopback URL nothing listens on.
func deadEndpoint(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestStoppedServerFailsFast: a client that never reached its server does
// not spend its Retry budget on refused dials. Issue 34: strand append
// against a stopped server hung for 60 s (the default budget) before
// failing, while read and ls failed at once; before the fix each call
// below took the whole 3 s budget.
func TestStoppedServerFailsFast(t *testing.T) {
	c, err := client.New(deadEndpoint(t), client.WithRetry(client.Retry{MaxAttempts: 1000, MaxElapsed: 3 * time.Second, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := map[string]func() error{
		"Append": func() error {
			_, err := c.Append(ctx, "s", []client.Record{{Body: []byte("x")}}, client.AppendOptions{})
			return err
		},
		"OpenProducerSession": func() error {
			_, err := c.OpenProducerSession(ctx, "s", client.ProducerOptions{})
			return err
		},
		"Trim": func() error {
			_, err := c.Trim(ctx, "s", 1, client.TrimOptions{})
			return err
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Errorf("%s: %v, want unavailable", name, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s took %v against a stopped server, want a prompt failure", name, d)
		}
	}
}

// TestRestartedServerIsRetried: once the client reached its server, a
// refused dial is a restart, retried within the budget.
func TestRestartedServerIsRetried(t *testing.T) {
	url, stop := startServer()
	var dials atomic.Int64
	h := client.NewHTTPClient()
	tr := h.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	c, err := client.New(url, fastRetry, client.WithHTTPClient(h))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(context.Background(), "s", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop()
	tr.CloseIdleConnections()
	before := dials.Load()
	_, err = c.Append(context.Background(), "s", []client.Record{{Body: []byte("x")}}, client.AppendOptions{})
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("append to a stopped server: %v, want unavailable", err)
	}
	if n := dials.Load() - before; n < 2 {
		t.Fatalf("%d dials after the server stopped, want retries (fastRetry: 5 attempts): %v", n, err)
	}
}

// TestStateTrimAndFence: State reports the trim point and whether the
// stream is fenced, never the token (for strand describe, issue 34).
func TestStateTrimAndFence(t *testing.T) {
	url, stop := startServer()
	defer stop()
	c := newStream(t, url)
	ctx := context.Background()
	st, err := c.State(ctx, "s")
	if err != nil || st.TrimSeq != 0 || st.Fenced || st.NextSeq != 0 {
		t.Fatalf("new stream: %+v %v", st, err)
	}
	if _, err := c.Append(ctx, "s", []client.Record{{Body: []byte("a")}, {Body: []byte("b")}}, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fence(ctx, "s", "tok", client.FenceOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Trim(ctx, "s", 1, client.TrimOptions{FenceToken: "tok"}); err != nil {
		t.Fatal(err)
	}
	st, err = c.State(ctx, "s")
	if err != nil || st.TrimSeq != 1 || !st.Fenced || st.NextSeq != 4 {
		t.Fatalf("after fence and trim: %+v %v; want trim 1, fenced, next 4", st, err)
	}
	if _, err := c.Fence(ctx, "s", "", client.FenceOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err = c.State(ctx, "s"); err != nil || st.Fenced {
		t.Fatalf("after unfence: %+v %v", st, err)
	}
}
