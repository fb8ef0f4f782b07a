package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
)

// TestReadSessionAtIdleTailAnswersAtOnce: a session opened at the tail of
// an idle stream gets its first message (a heartbeat carrying the tail) at
// once, not after the heartbeat interval (an hour here), so an open with a
// short deadline succeeds. Regression test: it failed before the fix (the
// first Next waited for the hour's heartbeat and the test's deadline ended
// the session).
func TestReadSessionAtIdleTailAnswersAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	c := newClient(t, n, adminTok)
	_, err := c.CreateStream(ctx, "idle", client.CreateOptions{})
	must(t, err)
	_, err = c.Append(ctx, "idle", recs(2, "r"), client.AppendOptions{})
	must(t, err)
	rs, err := c.OpenReadSession(ctx, "idle", client.FromSeq(2), client.SessionOptions{Heartbeat: time.Hour})
	must(t, err)
	defer rs.Close()
	if !rs.Next() {
		t.Fatalf("no first message: %v", rs.Err())
	}
	if b := rs.Batch(); !b.Heartbeat || len(b.Records) != 0 || b.Tail.NextSeq != 2 {
		t.Fatalf("first message %+v, want a heartbeat at tail 2", b)
	}
	// The session then tails as before.
	_, err = c.Append(ctx, "idle", recs(1, "new"), client.AppendOptions{})
	must(t, err)
	if !rs.Next() {
		t.Fatalf("session ended: %v", rs.Err())
	}
	if b := rs.Batch(); len(b.Records) != 1 || b.Records[0].Seq != 2 {
		t.Fatalf("second message %+v, want record 2", b)
	}
}
