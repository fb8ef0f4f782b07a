package hostile

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
)

// TestTrimAndFenceNeedTheirOps (issue 31 finding 8): an append token can
// neither trim a stream nor fence out its writers; the trim and fence
// operations (or admin) allow them, and CreateToken knows them.
func TestTrimAndFenceNeedTheirOps(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := e.client(t, e.admin)
	stream := e.w.Streams[0].Name
	mint := func(ops ...string) *client.Client {
		tok, _, err := admin.CreateToken(ctx, client.TokenSpec{Ops: ops})
		if err != nil {
			t.Fatalf("create a token with %v: %v", ops, err)
		}
		return e.client(t, tok)
	}
	appender := mint("append", "read")
	if _, err := appender.Append(ctx, stream, []client.Record{{Body: []byte("kept")}}, client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := appender.Trim(ctx, stream, 1<<63, client.TrimOptions{}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("an append token trims: %v, want permission_denied", err)
	}
	if _, err := appender.Fence(ctx, stream, "mine", client.FenceOptions{}); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("an append token fences: %v, want permission_denied", err)
	}
	if _, err := mint("trim").Trim(ctx, stream, 0, client.TrimOptions{}); err != nil {
		t.Errorf("a trim token trims: %v", err)
	}
	if _, err := mint("fence").Fence(ctx, stream, "", client.FenceOptions{}); err != nil {
		t.Errorf("a fence token fences: %v", err)
	}
}

// TestFencingTokenNotRead (issue 31 finding 11): a token without the fence
// operation reads a fence record without its body (the fencing token); a
// fence or admin token reads it whole.
func TestFencingTokenNotRead(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := e.client(t, e.admin)
	stream := e.w.Streams[0].Name
	seq, err := admin.Fence(ctx, stream, "secret-writer", client.FenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := admin.CreateToken(ctx, client.TokenSpec{Ops: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	body := func(c *client.Client) string {
		res, err := c.Read(ctx, stream, client.FromSeq(seq), client.Limits{Count: 1})
		if err != nil || len(res.Records) != 1 || res.Records[0].Seq != seq {
			t.Fatalf("read the fence record: %v %+v", err, res)
		}
		return string(res.Records[0].Body)
	}
	if got := body(e.client(t, tok)); got != "" {
		t.Errorf("a read-only token reads the fencing token %q", got)
	}
	if got := body(admin); got != "secret-writer" {
		t.Errorf("an admin reads the fence record's body %q, want the token", got)
	}
	rs, err := e.client(t, tok).OpenReadSession(ctx, stream, client.FromSeq(seq), client.SessionOptions{NoResume: true, NoTail: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		for _, r := range rs.Batch().Records {
			if r.Seq == seq && len(r.Body) != 0 {
				t.Errorf("a read-only session reads the fencing token %q", r.Body)
			}
		}
	}
}
