package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/tests/promtest"
)

// TestCallMetrics: every call counts by procedure and code (a refusal of
// the token's rights too), unary calls are timed, and an open session
// shows in strand_sessions_open until it ends.
func TestCallMetrics(t *testing.T) {
	n := newNode(t, newMeta(t), "s1", true, nil)
	c := strandv1connect.NewStrandServiceClient(http.DefaultClient, n.ts.URL)
	ctx := context.Background()
	authed := func(req connect.AnyRequest, token string) {
		req.Header().Set("Authorization", "Bearer "+token)
	}
	value := func(series string) float64 { return promtest.Value(t, n.star.Metrics(), series) }

	if v := value(`strand_sessions_open{procedure="ReadSession"}`); v != 0 {
		t.Fatalf("%v read sessions open before any", v)
	}
	if v := value(`strand_sessions_open{procedure="AppendSession"}`); v != 0 {
		t.Fatalf("%v append sessions open before any", v)
	}
	create := connect.NewRequest(&strandv1.CreateStreamRequest{Name: "logs/a"})
	authed(create, adminTok)
	if _, err := c.CreateStream(ctx, create); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		get := connect.NewRequest(&strandv1.GetStreamRequest{Name: "logs/missing"})
		authed(get, adminTok)
		_, err := c.GetStream(ctx, get)
		wantCode(t, err, connect.CodeNotFound)
	}
	denied := connect.NewRequest(&strandv1.CreateStreamRequest{Name: "logs/b"})
	authed(denied, readTok)
	_, err := c.CreateStream(ctx, denied)
	wantCode(t, err, connect.CodePermissionDenied)
	for series, want := range map[string]float64{
		`strand_calls_total{code="ok",procedure="CreateStream"}`:                1,
		`strand_calls_total{code="not_found",procedure="GetStream"}`:            2,
		`strand_calls_total{code="permission_denied",procedure="CreateStream"}`: 1,
		`strand_call_seconds_count{procedure="CreateStream"}`:                   2,
		`strand_call_seconds_count{procedure="GetStream"}`:                      2,
	} {
		if v := value(series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := connect.NewRequest(&strandv1.ReadSessionRequest{Stream: "logs/a"})
	authed(req, readTok)
	ss, err := c.ReadSession(sctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !ss.Receive() { // the answer to the open, or a heartbeat
		t.Fatalf("session: %v", ss.Err())
	}
	if v := value(`strand_sessions_open{procedure="ReadSession"}`); v != 1 {
		t.Fatalf("%v read sessions open, want 1", v)
	}
	cancel()
	_ = ss.Close()
	deadline := time.Now().Add(5 * time.Second)
	for value(`strand_sessions_open{procedure="ReadSession"}`) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the ended read session still counts as open")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := value(`strand_calls_total{code="ok",procedure="ReadSession"}`); v != 1 {
		t.Errorf("a session the client ended: %v ok calls, want 1", v)
	}
}
