package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/metrics"
)

// stub answers Read with two records, ReadSession with one message of
// three, and CheckTail with not_found.
type stub struct {
	strandv1connect.UnimplementedStrandServiceHandler
}

func (stub) Read(context.Context, *connect.Request[strandv1.ReadRequest]) (*connect.Response[strandv1.ReadResponse], error) {
	return connect.NewResponse(&strandv1.ReadResponse{Records: []*strandv1.SequencedRecord{{Body: []byte("ab")}, {Body: []byte("c")}}}), nil
}

func (stub) CheckTail(context.Context, *connect.Request[strandv1.CheckTailRequest]) (*connect.Response[strandv1.CheckTailResponse], error) {
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no such stream"))
}

func (stub) ReadSession(_ context.Context, _ *connect.Request[strandv1.ReadSessionRequest], s *connect.ServerStream[strandv1.ReadSessionResponse]) error {
	return s.Send(&strandv1.ReadSessionResponse{Records: []*strandv1.SequencedRecord{{Body: []byte("x")}, {Body: []byte("y")}, {Body: []byte("z")}}})
}

// TestCallInterceptor: calls by procedure and code, durations, open
// sessions and records read, through a real Connect handler and client
// (issue 34: nothing measured reads, sessions or error codes).
func TestCallInterceptor(t *testing.T) {
	reg := metrics.NewRegistry()
	_, h := strandv1connect.NewStrandServiceHandler(stub{}, connect.WithInterceptors(reg.CallInterceptor()))
	ts := httptest.NewServer(h)
	defer ts.Close()
	c := strandv1connect.NewStrandServiceClient(http.DefaultClient, ts.URL)
	ctx := context.Background()
	if _, err := c.Read(ctx, connect.NewRequest(&strandv1.ReadRequest{Stream: "s"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckTail(ctx, connect.NewRequest(&strandv1.CheckTailRequest{Stream: "s"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("CheckTail: %v", err)
	}
	ss, err := c.ReadSession(ctx, connect.NewRequest(&strandv1.ReadSessionRequest{Stream: "s"}))
	if err != nil {
		t.Fatal(err)
	}
	for ss.Receive() {
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	reg.Write(&b)
	out := b.String()
	for _, want := range []string{
		`strand_calls_total{code="ok",procedure="Read"} 1`,
		`strand_calls_total{code="not_found",procedure="CheckTail"} 1`,
		`strand_calls_total{code="ok",procedure="ReadSession"} 1`,
		`strand_call_seconds_count{procedure="Read"} 1`,
		`strand_call_seconds_count{procedure="ReadSession"} 1`,
		`strand_sessions{procedure="ReadSession"} 0`,
		"strand_read_records_total 5",
		"strand_read_bytes_total 6",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

// TestCallInterceptorAllocs: after a procedure's first call, counting a
// call allocates nothing.
func TestCallInterceptorAllocs(t *testing.T) {
	reg := metrics.NewRegistry()
	call := reg.CallInterceptor().WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) { return nil, nil })
	req := connect.NewRequest(&strandv1.CheckTailRequest{})
	ctx := context.Background()
	_, _ = call(ctx, req)
	if n := testing.AllocsPerRun(100, func() { _, _ = call(ctx, req) }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
