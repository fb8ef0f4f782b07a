package hostile

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
)

// relayServer serves e's API on a loopback listener bounded by l and
// returns its address.
func relayServer(t *testing.T, e *env, l server.ConnLimits) string {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := server.NewHTTPServer(e.ts.Config.Handler, server.Limits{})
	go func() { _ = hs.Serve(server.NewListener(raw, l)) }()
	t.Cleanup(func() { _ = hs.Close() })
	return raw.Addr().String()
}

// ownConn is a client of the admin's token on a connection of its own
// (HTTP/1.1, kept open between calls).
func ownConn(t *testing.T, e *env, addr string, opts ...client.Option) (*client.Client, *http.Transport) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New("http://"+addr, append([]client.Option{client.WithToken(e.admin), client.WithHTTPClient(&http.Client{Transport: tr})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, tr
}

// TestRelayedConnsServed (ADR 0074): a standby relays its clients'
// connections to the leader from its own address (ADR 0051). 300
// connections from one source whose calls carry a tenant's valid token
// are all served (they count in the tenant's share, 512, not the
// source's 256), and 300 strangers from that source are still held to
// 256. Before, the 257th connection was closed as it was accepted and
// its call failed.
func TestRelayedConnsServed(t *testing.T) {
	e := newEnv(t, nil)
	addr := relayServer(t, e, server.ConnLimits{AuthDeadline: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 300 {
		c, _ := ownConn(t, e, addr)
		if _, err := c.CheckTail(ctx, e.w.Streams[0].Name); err != nil {
			t.Fatalf("relayed connection %d: %v", i+1, err)
		}
	}
	var strangers []net.Conn
	for range 300 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		strangers = append(strangers, c)
	}
	for i, c := range strangers[server.DefaultMaxConnsPerSource:] {
		if !closedWithin(c, 2*time.Second) {
			t.Fatalf("stranger %d of one source is open past its limit of %d", server.DefaultMaxConnsPerSource+i+1, server.DefaultMaxConnsPerSource)
		}
	}
	for i, c := range strangers[:server.DefaultMaxConnsPerSource] {
		if closedWithin(c, time.Millisecond) {
			t.Fatalf("stranger %d of one source, within its limit, was closed before its deadline", i+1)
		}
	}
}

// TestTenantConnShare: with a server of 4 connections, one tenant's take
// at most half: a call on its third connection is resource_exhausted,
// and once one of its connections closes a call on a new one is served.
// Before, the third connection was charged to no tenant and served.
func TestTenantConnShare(t *testing.T) {
	e := newEnv(t, nil)
	addr := relayServer(t, e, server.ConnLimits{MaxConns: 4, MaxConnsPerTenant: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, firstTr := ownConn(t, e, addr)
	second, _ := ownConn(t, e, addr)
	// One attempt per call: the client retries resource_exhausted (it
	// would wait out this test's deadline); what is checked is the server's.
	third, _ := ownConn(t, e, addr, client.WithRetry(client.Retry{MaxAttempts: 1}))
	for _, c := range []*client.Client{first, second} {
		if _, err := c.CheckTail(ctx, e.w.Streams[0].Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := third.CheckTail(ctx, e.w.Streams[0].Name); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a tenant's third connection of 4: %v, want resource_exhausted (its share is 2)", err)
	}
	firstTr.CloseIdleConnections()
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := third.CheckTail(ctx, e.w.Streams[0].Name)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenant's share was not given back when its connection closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// closedWithin reports whether the server closed the client's end c
// within d (a read ends otherwise than by its deadline).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}
