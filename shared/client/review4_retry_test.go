package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
				if strings.HasSuffix(r.URL.Path, "/"+name) {
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
			if err := call(c); err == nil {
				t.Fatal("a call whose connection dropped succeeded")
			}
			if n := got.Load(); n != 1 {
				t.Fatalf("%s sent %d times after its connection dropped mid-call, want once (not idempotent)", name, n)
			}
		})
	}
}
