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
	stream := e.w.Streams[0].Name
	open := func(tok string) (*client.ReadSession, error) {
		c, err := client.New(e.ts.URL, client.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.OpenReadSession(ctx, stream, client.FromSeq(0), client.SessionOptions{NoResume: true}) // the client would retry resource_exhausted
		if err != nil {
			return nil, err
		}
		// The first answer (a batch or a heartbeat) shows the session is
		// admitted.
		if !s.Next() {
			err := s.Err()
			s.Close()
			return nil, err
		}
		return s, nil
	}
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
