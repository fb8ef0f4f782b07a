package hostile

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
)

// recheck is the sessions' token recheck interval in these tests.
const recheck = 50 * time.Millisecond

func (e *env) client(t testing.TB, token string) *client.Client {
	t.Helper()
	c, err := client.New(e.ts.URL, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sessionsOf opens an append session and a read session with token and
// returns a function that waits (up to 5 s) for both to end and returns
// their last errors; meanwhile it keeps appending.
func (e *env) sessionsOf(t *testing.T, ctx context.Context, token string) func() (appendErr, readErr error) {
	t.Helper()
	c := e.client(t, token)
	stream := e.w.Streams[0].Name
	as, err := c.OpenAppendSession(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(as.Close)
	if err := as.Submit([]client.Record{{Body: []byte("before")}}, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if a := <-as.Acks(); a.Err != nil {
		t.Fatalf("the first append: %v", a.Err)
	}
	rs, err := c.OpenReadSession(ctx, stream, client.FromSeq(0), client.SessionOptions{NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	if !rs.Next() {
		t.Fatalf("the read session's first batch: %v", rs.Err())
	}
	return func() (error, error) {
		readDone := make(chan error, 1)
		go func() {
			for rs.Next() {
			}
			readDone <- rs.Err()
		}()
		var appendErr error
		deadline := time.After(5 * time.Second)
	loop:
		for {
			_ = as.Submit([]client.Record{{Body: []byte("after")}}, client.AppendOptions{})
			select {
			case a, ok := <-as.Acks():
				if !ok {
					break loop
				}
				if a.Err != nil {
					appendErr = a.Err
					break loop
				}
			case <-deadline:
				t.Error("the append session still takes appends 5 s later")
				break loop
			}
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case err := <-readDone:
			return appendErr, err
		case <-time.After(5 * time.Second):
			t.Error("the read session is still open 5 s later")
			return appendErr, nil
		}
	}
}

func wantUnauthenticated(t *testing.T, what string, err error) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("%s: %v, want unauthenticated", what, err)
	}
}

// TestRevokeEndsSessions (issue 31 finding 3): revoking a token ends its
// open append and read sessions within the recheck interval, with
// unauthenticated; so does its expiry.
func TestRevokeEndsSessions(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Limits.SessionRecheck = recheck })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := e.client(t, e.admin)
	tok, info, err := admin.CreateToken(ctx, client.TokenSpec{Ops: []string{"read", "append"}})
	if err != nil {
		t.Fatal(err)
	}
	wait := e.sessionsOf(t, ctx, tok)
	if err := admin.RevokeToken(ctx, info.Hash); err != nil {
		t.Fatal(err)
	}
	a, r := wait()
	wantUnauthenticated(t, "append session after revoke", a)
	wantUnauthenticated(t, "read session after revoke", r)

	exp, _, err := admin.CreateToken(ctx, client.TokenSpec{Ops: []string{"read", "append"}, ExpiresMs: time.Now().Add(1500 * time.Millisecond).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	wait = e.sessionsOf(t, ctx, exp)
	a, r = wait()
	wantUnauthenticated(t, "append session after expiry", a)
	wantUnauthenticated(t, "read session after expiry", r)
}

// TestChildNeverOutlivesParent (issue 31 finding 4): a token minted by an
// expiring token expires with it (at the latest), and revoking or expiring
// a token ends every token minted under it, and their sessions.
func TestChildNeverOutlivesParent(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Limits.SessionRecheck = recheck })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := e.client(t, e.admin)
	expires := time.Now().Add(2 * time.Second).UnixMilli()
	parent, _, err := admin.CreateToken(ctx, client.TokenSpec{Prefix: "team-a/", Ops: []string{"admin"}, ExpiresMs: expires})
	if err != nil {
		t.Fatal(err)
	}
	child, info, err := e.client(t, parent).CreateToken(ctx, client.TokenSpec{Prefix: "team-a/", Ops: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if info.ExpiresMs != expires {
		t.Errorf("a child of a token expiring at %d expires at %d", expires, info.ExpiresMs)
	}
	if _, _, err := e.client(t, child).CreateToken(ctx, client.TokenSpec{Prefix: "team-a/", Ops: []string{"admin"}, ExpiresMs: expires + 60_000}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.UnixMilli(expires)) + 100*time.Millisecond)
	if _, err := e.client(t, child).CreateStream(ctx, "team-a/after", client.CreateOptions{Class: "express"}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("the child after its parent expired: %v, want unauthenticated", err)
	}

	// Revoking an ancestor: the grandchild's sessions end, its calls fail.
	p2, p2info, err := admin.CreateToken(ctx, client.TokenSpec{Ops: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	c2, _, err := e.client(t, p2).CreateToken(ctx, client.TokenSpec{Ops: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	gc, _, err := e.client(t, c2).CreateToken(ctx, client.TokenSpec{Ops: []string{"read", "append"}})
	if err != nil {
		t.Fatal(err)
	}
	wait := e.sessionsOf(t, ctx, gc)
	if err := admin.RevokeToken(ctx, p2info.Hash); err != nil {
		t.Fatal(err)
	}
	a, r := wait()
	wantUnauthenticated(t, "grandchild's append session after revoke", a)
	wantUnauthenticated(t, "grandchild's read session after revoke", r)
	if _, err := e.client(t, c2).CreateStream(ctx, "child-after-revoke", client.CreateOptions{Class: "express"}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("the child after its parent was revoked: %v, want unauthenticated", err)
	}
}

// TestSessionsPerTenant (issue 31 finding 9): a prefix admin that mints
// tokens does not get more sessions: the limit counts the tenant (the
// tokens under one root token), not each token.
func TestSessionsPerTenant(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Limits.MaxSessionsPerToken = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := e.api.Issue(t, 9, "", auth.Admin)
	var open []*client.ReadSession
	defer func() {
		for _, s := range open {
			s.Close()
		}
	}()
	var last error
	for range 3 {
		tok, _, err := e.client(t, root).CreateToken(ctx, client.TokenSpec{Ops: []string{"read"}})
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.client(t, tok).OpenReadSession(ctx, e.w.Streams[0].Name, client.FromSeq(0), client.SessionOptions{NoResume: true})
		if err == nil && s.Next() {
			open = append(open, s)
			continue
		}
		if err == nil {
			err = s.Err()
			s.Close()
		}
		last = err
	}
	if len(open) != 2 || connect.CodeOf(last) != connect.CodeResourceExhausted {
		t.Errorf("3 tokens of one tenant opened %d sessions (limit 2); the refusal: %v", len(open), last)
	}
}
