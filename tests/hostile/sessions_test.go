package hostile

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
)

// openSession opens a read session of e's first stream with tok and
// waits for its first answer (a batch or a heartbeat), which shows it is
// admitted.
func openSession(ctx context.Context, t *testing.T, e *env, tok string) (*client.ReadSession, error) {
	t.Helper()
	c, err := client.New(e.ts.URL, client.WithToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.OpenReadSession(ctx, e.w.Streams[0].Name, client.FromSeq(0), client.SessionOptions{NoResume: true}) // the client would retry resource_exhausted
	if err != nil {
		return nil, err
	}
	if !s.Next() {
		err := s.Err()
		s.Close()
		return nil, err
	}
	return s, nil
}

// TestSessionsBoundedOverall: the server holds at most MaxSessions (4
// here) sessions, all tenants together, and one tenant at most half of
// them whatever its own limit (1000 here): tenant A's third session is
// refused, B takes the other two, and C's first is refused saying the
// server is at its limit; a closed session frees a place. Before
// MaxSessions, A opened all its 1000 and the server had no bound but the
// connections' HTTP/2 streams (102,400).
func TestSessionsBoundedOverall(t *testing.T) {
	e := newEnv(t, func(c *server.Config) {
		c.Limits.MaxSessions, c.Limits.MaxSessionsPerToken, c.Heartbeat = 4, 1000, 100*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	toks := []string{e.admin}
	for i := byte(2); i <= 3; i++ {
		tok, _ := auth.NewToken(bytes.NewReader(bytes.Repeat([]byte{i}, 32)))
		if err := auth.Issue(ctx, e.w.Meta, tok, "", []auth.Op{auth.Admin}); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	refused := func(tok, why string) {
		t.Helper()
		s, err := openSession(ctx, t, e, tok)
		if s != nil {
			s.Close()
		}
		if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), why) {
			t.Fatalf("a session past the limits: %v, want resource_exhausted saying %q", err, why)
		}
	}
	var held []*client.ReadSession
	defer func() {
		for _, s := range held {
			s.Close()
		}
	}()
	for _, tok := range []string{toks[0], toks[0], toks[1], toks[1]} {
		s, err := openSession(ctx, t, e, tok)
		if err != nil {
			t.Fatalf("session %d within the limits: %v", len(held)+1, err)
		}
		held = append(held, s)
		if len(held) == 2 {
			refused(toks[0], "already has 2 sessions open on this server (the limit)")
		}
	}
	refused(toks[2], "this server already has 4 sessions open, all tenants together (the limit)")
	held[0].Close()
	held = held[1:]
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var s *client.ReadSession
		if s, err = openSession(ctx, t, e, toks[2]); err == nil {
			held = append(held, s)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a session after one closed: %v", err)
		}
	}
}

// TestSessionsPerTokenBounded: past its session limit a token's next
// session is refused with ResourceExhausted, saying why; another token is
// not affected; a closed session frees its place.
func TestSessionsPerTokenBounded(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.Limits.MaxSessionsPerToken, c.Heartbeat = 2, 100*time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other, _ := auth.NewToken(bytes.NewReader(bytes.Repeat([]byte{2}, 32)))
	if err := auth.Issue(ctx, e.w.Meta, other, "", []auth.Op{auth.Admin}); err != nil {
		t.Fatal(err)
	}
	open := func(tok string) (*client.ReadSession, error) { return openSession(ctx, t, e, tok) }
	first, err := open(e.admin)
	if err != nil {
		t.Fatal(err)
	}
	second, err := open(e.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if s, err := open(e.admin); connect.CodeOf(err) != connect.CodeResourceExhausted {
		if s != nil {
			s.Close()
		}
		t.Fatalf("a third session of one token: %v, want resource_exhausted", err)
	} else if !strings.Contains(err.Error(), "already has 2 sessions open on this server (the limit)") {
		t.Fatalf("the refusal does not name the limit: %v", err)
	}
	s, err := open(other)
	if err != nil {
		t.Fatalf("another token's session: %v", err)
	}
	s.Close()
	first.Close()
	var again *client.ReadSession
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if again, err = open(e.admin); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("a session after one closed: %v", err)
	}
	again.Close()
}
