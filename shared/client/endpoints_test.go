package client

import (
	"context"
	"net"
	"net/http"
	"testing"

	"connectrpc.com/connect"
)

// deadEndpoint is a loopback address nothing listens on (connection
// refused, as a standby that does not lead yet answers).
func deadEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestEndpointsFailover: with the serving endpoint second in the list, a
// call refused at the first moves the client on and its retry reaches the
// serving one, and later calls start there.
func TestEndpointsFailover(t *testing.T) {
	live := serve(t, &fakeStar{}, false)
	dead := deadEndpoint(t)
	c, err := New(dead+", "+live.URL, WithHTTPClient(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	if c.Endpoint() != dead {
		t.Fatalf("starts at %s, want the first endpoint %s", c.Endpoint(), dead)
	}
	for i := 0; i < 2; i++ {
		tail, err := c.CheckTail(context.Background(), "s")
		if err != nil || tail.NextSeq != 7 {
			t.Fatalf("CheckTail %d = %+v, %v; want the live endpoint's tail 7", i, tail, err)
		}
		if c.Endpoint() != live.URL {
			t.Errorf("endpoint %s after call %d, want %s", c.Endpoint(), i, live.URL)
		}
	}
	// One endpoint: a refused call fails after its retries, and the
	// client stays there.
	one, err := New(dead, WithHTTPClient(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.CheckTail(context.Background(), "s"); err == nil || one.Endpoint() != dead {
		t.Errorf("one dead endpoint: %v, at %s", err, one.Endpoint())
	}
}

// TestEndpointsFirstContactTriesEach: a client on the default Retry fails
// fast when its server was never reached, but with the first of two
// endpoints down at first contact it still reaches the second (it failed
// with the dial error before: the fail-fast rule of first34 met the
// endpoint list of avail32).
func TestEndpointsFirstContactTriesEach(t *testing.T) {
	live := serve(t, &fakeStar{}, false)
	dead := deadEndpoint(t)
	c, err := New(dead+","+live.URL, WithHTTPClient(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Append(context.Background(), "s", []Record{{Body: []byte("x")}}, AppendOptions{})
	if code := connect.CodeOf(err); code != connect.CodeUnimplemented {
		t.Fatalf("Append = %v (code %v), want the live endpoint's answer (unimplemented)", err, code)
	}
	if c.Endpoint() != live.URL {
		t.Errorf("endpoint %s, want %s", c.Endpoint(), live.URL)
	}
}

// TestEndpointsRedirectIsServing: a star that answers Unavailable with
// where the leader is (a Leader detail) is serving: the client follows
// the detail and does not move its endpoint.
func TestEndpointsRedirectIsServing(t *testing.T) {
	leader := serve(t, &fakeStar{}, false)
	follower := serve(t, &fakeStar{leaderURL: leader.URL}, false)
	other := serve(t, &fakeStar{}, false)
	c, err := New(follower.URL+","+other.URL, WithHTTPClient(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	if tail, err := c.CheckTail(context.Background(), "s"); err != nil || tail.NextSeq != 7 {
		t.Fatalf("CheckTail = %+v, %v", tail, err)
	}
	if c.Endpoint() != follower.URL {
		t.Errorf("endpoint moved to %s on a redirect, want %s", c.Endpoint(), follower.URL)
	}
}

func TestParseEndpoints(t *testing.T) {
	got, err := parseEndpoints("127.0.0.1:1, https://a.example.com:2/,")
	if err != nil || len(got) != 2 || got[0] != "http://127.0.0.1:1" || got[1] != "https://a.example.com:2" {
		t.Errorf("parseEndpoints = %v, %v", got, err)
	}
	for _, bad := range []string{"", ",", " , ", "ftp://a:1", "http://a:1,https://b:2"} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

// TestEveryCallMovesOnToTheStandby: with the leader's endpoint refused
// and its standby second in the list, every call a CLI command opens with
// reaches the standby on a new client (one process, one call: the first
// walk of the README's standby found `strand ls`, `read`, `check-tail`,
// `describe`, `create` and `token ls` failing at once with the first
// endpoint's dial error; only appends moved on). Each gets the live
// fake's answer: CheckTail its tail, the others Unimplemented.
func TestEveryCallMovesOnToTheStandby(t *testing.T) {
	live := serve(t, &fakeStar{}, false)
	dead := deadEndpoint(t)
	ctx := context.Background()
	calls := map[string]func(c *Client) error{
		"CheckTail": func(c *Client) error {
			tail, err := c.CheckTail(ctx, "s")
			if err == nil && tail.NextSeq != 7 {
				t.Errorf("CheckTail: tail %+v, want the live fake's 7", tail)
			}
			return err
		},
		"Read": func(c *Client) error { _, err := c.Read(ctx, "s", FromSeq(0), Limits{}); return err },
		"ListStreams": func(c *Client) error {
			_, _, err := c.ListStreams(ctx, "", "", 0)
			return err
		},
		"GetStream":    func(c *Client) error { _, err := c.GetStream(ctx, "s"); return err },
		"CreateStream": func(c *Client) error { _, err := c.CreateStream(ctx, "s", CreateOptions{}); return err },
		"ListTokens":   func(c *Client) error { _, err := c.ListTokens(ctx, ""); return err },
		"CreateToken": func(c *Client) error {
			_, _, err := c.CreateToken(ctx, TokenSpec{Prefix: "a/", Ops: []string{"read"}})
			return err
		},
		"RevokeToken": func(c *Client) error { return c.RevokeToken(ctx, "00") },
	}
	for name, call := range calls {
		c, err := New(dead+","+live.URL, WithHTTPClient(http.DefaultClient))
		if err != nil {
			t.Fatal(err)
		}
		err = call(c)
		if name == "CheckTail" && err != nil || name != "CheckTail" && connect.CodeOf(err) != connect.CodeUnimplemented {
			t.Errorf("%s: %v, want the live endpoint's answer", name, err)
		}
		if c.Endpoint() != live.URL {
			t.Errorf("%s: endpoint %s after the call, want %s", name, c.Endpoint(), live.URL)
		}
	}
}
