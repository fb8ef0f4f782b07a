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

// countingClient is an HTTP client that counts its dials.
func countingClient() (*http.Client, *atomic.Int64) {
	var dials atomic.Int64
	h := client.NewHTTPClient()
	h.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return h, &dials
}

// TestStoppedServerFailsFast: a client on the default budget that never
// reached its server does not spend the budget on refused dials. Issue
// 34: strand append against a stopped server hung for 60 s (the default
// budget) before failing, while read and ls failed at once; before the
// fix each call below took those 60 s.
func TestStoppedServerFailsFast(t *testing.T) {
	c, err := client.New(deadEndpoint(t))
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
		// Retried since the first walk (TestEveryCallMovesOnToTheStandby):
		// still prompt at first contact.
		"CheckTail": func() error {
			_, err := c.CheckTail(ctx, "s")
			return err
		},
		"ListStreams": func() error {
			_, _, err := c.ListStreams(ctx, "", "", 0)
			return err
		},
		"CreateStream": func() error {
			_, err := c.CreateStream(ctx, "s", client.CreateOptions{})
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

// TestGivenRetryWaitsForTheServer: a client given a Retry retries refused
// dials from its first call (its caller may be starting the server).
func TestGivenRetryWaitsForTheServer(t *testing.T) {
	h, dials := countingClient()
	c, err := client.New(deadEndpoint(t), fastRetry, client.WithHTTPClient(h))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckTail(context.Background(), "s"); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("CheckTail: %v", err)
	}
	if _, err := c.Trim(context.Background(), "s", 1, client.TrimOptions{}); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("Trim: %v", err)
	}
	if n := dials.Load(); n < 3 {
		t.Fatalf("%d dials, want Trim retried (fastRetry: 5 attempts)", n)
	}
}

// TestRestartedServerIsRetried: once the client reached its server, a
// refused dial is a restart, retried within the budget, on the default
// budget too.
func TestRestartedServerIsRetried(t *testing.T) {
	url, stop := startServer()
	h, dials := countingClient()
	tr := h.Transport.(*http.Transport)
	c, err := client.New(url, client.WithHTTPClient(h))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(context.Background(), "s", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop()
	tr.CloseIdleConnections()
	before := dials.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Append(ctx, "s", []client.Record{{Body: []byte("x")}}, client.AppendOptions{})
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("append to a stopped server: %v, want unavailable", err)
	}
	if n := dials.Load() - before; n < 2 {
		t.Fatalf("%d dials after the server stopped, want retries: %v", n, err)
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
