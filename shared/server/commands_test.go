package server_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
)

// TestFenceAndTrimOverTheAPI: Fence and Trim through the API. A fenced
// stream refuses appends without its token with FailedPrecondition (not
// retriable, nothing written); Trim is honoured by reads at once; bad
// tokens are InvalidArgument; a read token may not fence.
func TestFenceAndTrimOverTheAPI(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	c := newClient(t, n, adminTok)
	_, err := c.CreateStream(ctx, "logs/f", client.CreateOptions{})
	must(t, err)
	_, err = c.Append(ctx, "logs/f", recs(5, "a"), client.AppendOptions{})
	must(t, err)
	seq, err := c.Fence(ctx, "logs/f", "writer-2", client.FenceOptions{})
	must(t, err)
	if seq != 5 {
		t.Fatalf("fence record at seq %d, want 5", seq)
	}
	_, err = c.Append(ctx, "logs/f", recs(1, "deposed"), client.AppendOptions{})
	wantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), "fencing token mismatch") {
		t.Fatalf("error %q does not say why", err)
	}
	_, err = c.Append(ctx, "logs/f", recs(1, "deposed"), client.AppendOptions{FenceToken: "writer-1"})
	wantCode(t, err, connect.CodeFailedPrecondition)
	ack, err := c.Append(ctx, "logs/f", recs(2, "b"), client.AppendOptions{FenceToken: "writer-2"})
	must(t, err)
	if ack.StartSeq != 6 {
		t.Fatalf("ack %+v: a refused append was written", ack)
	}
	cur := "writer-1"
	_, err = c.Fence(ctx, "logs/f", "writer-3", client.FenceOptions{CurrentToken: &cur})
	wantCode(t, err, connect.CodeFailedPrecondition)
	_, err = c.Fence(ctx, "logs/f", strings.Repeat("x", 37), client.FenceOptions{})
	wantCode(t, err, connect.CodeInvalidArgument)

	// Trim must carry the token of a fenced stream; reads honour it at once.
	_, err = c.Trim(ctx, "logs/f", 3, client.TrimOptions{})
	wantCode(t, err, connect.CodeFailedPrecondition)
	tr, err := c.Trim(ctx, "logs/f", 3, client.TrimOptions{FenceToken: "writer-2"})
	must(t, err)
	if tr.Seq != 8 || tr.TrimSeq != 3 {
		t.Fatalf("trim %+v", tr)
	}
	res, err := c.Read(ctx, "logs/f", client.FromSeq(0), client.Limits{})
	must(t, err)
	if len(res.Records) != 6 || res.Records[0].Seq != 3 || res.Records[5].Seq != 8 {
		t.Fatalf("read from 0 after the trim: %d records from %d", len(res.Records), res.Records[0].Seq)
	}
	// The command records are in the stream: one header, empty name.
	if h := res.Records[2].Headers; res.Records[2].Seq != 5 || len(h) != 1 || len(h[0].Name) != 0 || string(h[0].Value) != "fence" || string(res.Records[2].Body) != "writer-2" {
		t.Fatalf("fence record %+v", res.Records[2])
	}

	// Read and append tokens (logs/) may not fence or trim (issue 31);
	// fence tokens may fence.
	_, err = newClient(t, n, readTok).Fence(ctx, "logs/f", "r", client.FenceOptions{})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = newClient(t, n, appendTok).Fence(ctx, "logs/f", "", client.FenceOptions{CurrentToken: strp("writer-2")})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = newClient(t, n, appendTok).Trim(ctx, "logs/f", 4, client.TrimOptions{FenceToken: "writer-2"})
	wantCode(t, err, connect.CodePermissionDenied)
	fenceTok, _, err := c.CreateToken(ctx, client.TokenSpec{Prefix: "logs/", Ops: []string{"fence"}})
	must(t, err)
	_, err = newClient(t, n, fenceTok).Fence(ctx, "logs/f", "", client.FenceOptions{CurrentToken: strp("writer-2")})
	must(t, err)
	_, err = c.Append(ctx, "logs/f", recs(1, "c"), client.AppendOptions{})
	must(t, err)
}

func strp(s string) *string { return &s }

// TestReconfigureStream: ReconfigureStream changes a stream's timestamping
// from its command record on (an append without a timestamp is refused
// after client-require, accepted again after client-prefer), keeps what
// it is not given, and GetStream and ListStreams show the new
// configuration; bad input is InvalidArgument; it needs admin.
func TestReconfigureStream(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, newMeta(t), "star-0", true, nil)
	c := newClient(t, n, adminTok)
	_, err := c.CreateStream(ctx, "logs/c", client.CreateOptions{RetentionMs: 60000})
	must(t, err)
	_, err = c.Append(ctx, "logs/c", recs(2, "a"), client.AppendOptions{})
	must(t, err)
	s, seq, err := c.ReconfigureStream(ctx, "logs/c", client.ReconfigureOptions{Timestamping: "client-require"})
	must(t, err)
	if seq != 2 || s.Timestamping != "client-require" || s.RetentionMs != 60000 || s.Uncapped {
		t.Fatalf("reconfigured %+v at seq %d", s, seq)
	}
	_, err = c.Append(ctx, "logs/c", recs(1, "b"), client.AppendOptions{})
	wantCode(t, err, connect.CodeInvalidArgument)
	if !strings.Contains(err.Error(), "requires client timestamps") {
		t.Fatalf("error %q", err)
	}
	ack, err := c.Append(ctx, "logs/c", []client.Record{{TimestampMs: 1000, Body: []byte("t")}}, client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != 3 {
		t.Fatalf("ack %+v", ack)
	}
	zero, yes := int64(0), true
	s, _, err = c.ReconfigureStream(ctx, "logs/c", client.ReconfigureOptions{RetentionMs: &zero, Timestamping: "client-prefer", Uncapped: &yes})
	must(t, err)
	got, err := c.GetStream(ctx, "logs/c")
	must(t, err)
	if got.RetentionMs != 0 || got.Timestamping != "client-prefer" || !got.Uncapped || s != got {
		t.Fatalf("GetStream %+v, reconfigure answered %+v", got, s)
	}
	list, _, err := c.ListStreams(ctx, "logs/c", "", 10)
	must(t, err)
	if len(list) != 1 || list[0] != got {
		t.Fatalf("ListStreams %+v", list)
	}
	_, err = c.Append(ctx, "logs/c", recs(1, "c"), client.AppendOptions{})
	must(t, err)
	_, _, err = c.ReconfigureStream(ctx, "logs/c", client.ReconfigureOptions{})
	wantCode(t, err, connect.CodeInvalidArgument)
	neg := int64(-5)
	_, _, err = c.ReconfigureStream(ctx, "logs/c", client.ReconfigureOptions{RetentionMs: &neg})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, _, err = newClient(t, n, appendTok).ReconfigureStream(ctx, "logs/c", client.ReconfigureOptions{RetentionMs: &zero})
	wantCode(t, err, connect.CodePermissionDenied)
}
