package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
)

// lossy serves h, but drops the connection after the handler ran for the
// calls drop says: the append is committed, its answer lost.
type lossy struct {
	h    http.Handler
	drop func(r *http.Request) bool
}

// cutWriter aborts the connection after limit response writes.
type cutWriter struct {
	http.ResponseWriter
	writes, limit int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes > w.limit {
		panic(http.ErrAbortHandler)
	}
	if w.writes == w.limit && len(p) > 3 {
		// Half an envelope, then the connection drops.
		n, _ := w.ResponseWriter.Write(p[:3])
		w.ResponseWriter.(http.Flusher).Flush()
		_ = n
		panic(http.ErrAbortHandler)
	}
	return w.ResponseWriter.Write(p)
}

func (w *cutWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (l lossy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l.drop(r) {
		if strings.HasSuffix(r.URL.Path, "/ReadSession") || strings.HasSuffix(r.URL.Path, "/AppendSession") {
			l.h.ServeHTTP(&cutWriter{ResponseWriter: w, limit: 2}, r)
			return
		}
		l.h.ServeHTTP(httptest.NewRecorder(), r) // runs, answer discarded
		panic(http.ErrAbortHandler)
	}
	l.h.ServeHTTP(w, r)
}

func lossyServer(t *testing.T, drop func(r *http.Request) bool) string {
	url, stop := startServerWith(func(h http.Handler) http.Handler { return lossy{h: h, drop: drop} })
	t.Cleanup(stop)
	return url
}

// fastRetry is a retry budget for tests: quick backoff.
var fastRetry = client.WithRetry(client.Retry{MaxAttempts: 5, MaxElapsed: 10 * time.Second, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})

// newStream returns a client of url with fastRetry and a new stream "s".
func newStream(t *testing.T, url string) *client.Client {
	c, err := client.New(url, fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(context.Background(), "s", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLostAnswersAreRetriedExactlyOnce: every other append's answer is
// lost after the batch committed; the client retries with the same
// producer id and batch seq, gets the original ack, and the stream holds
// every record once, in order.
func TestLostAnswersAreRetriedExactlyOnce(t *testing.T) {
	var n atomic.Int64
	url := lossyServer(t, func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Path, "/Append") && n.Add(1)%2 == 1
	})
	ctx := context.Background()
	c := newStream(t, url)
	for i := range 20 {
		a, err := c.Append(ctx, "s", []client.Record{{Body: fmt.Appendf(nil, "r%d", i)}}, client.AppendOptions{})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if a.StartSeq != uint64(i) || a.EndSeq != uint64(i+1) {
			t.Fatalf("append %d acked %d-%d", i, a.StartSeq, a.EndSeq)
		}
	}
	res, err := c.Read(ctx, "s", client.FromSeq(0), client.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 20 {
		t.Fatalf("stream holds %d records, want 20 (duplicates or losses)", len(res.Records))
	}
	for i, r := range res.Records {
		if string(r.Body) != fmt.Sprintf("r%d", i) {
			t.Fatalf("record %d is %q", i, r.Body)
		}
	}
	// Without idempotence a lost answer is not retried: its outcome is
	// unknown and a blind retry could write it twice.
	plain, _ := client.New(url, client.WithoutIdempotence(), client.WithRetry(client.Retry{MaxAttempts: 5, MaxElapsed: time.Second, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	var failed int
	for range 2 {
		if _, err := plain.Append(ctx, "s", []client.Record{{Body: []byte("x")}}, client.AppendOptions{}); err != nil {
			failed++
			if connect.CodeOf(err) != connect.CodeUnavailable || connect.CodeOf(err) == connect.CodeInvalidArgument {
				t.Fatalf("lost answer surfaces as %v: %v", connect.CodeOf(err), err)
			}
		}
	}
	if failed != 1 {
		t.Fatalf("%d of 2 plain appends failed, want the one whose answer was lost", failed)
	}
}

// TestIncompleteEnvelopeIsUnavailable is the regression test for a
// connection that drops mid-message being reported as invalid_argument:
// it is Unavailable, retriable.
func TestIncompleteEnvelopeIsUnavailable(t *testing.T) {
	err := connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("protocol error: incomplete envelope: %w", io.ErrUnexpectedEOF))
	if !client.Retriable(err) {
		t.Fatalf("%v is not retriable", err)
	}
	for _, code := range []connect.Code{connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeNotFound, connect.CodePermissionDenied} {
		if client.Retriable(connect.NewError(code, errors.New("x"))) {
			t.Errorf("%v is retriable", code)
		}
	}
}

// TestReadSessionResumesAfterTheLastRecord: the session's connection drops
// mid-message; the session reopens after the last record it delivered and
// says so; every record arrives once.
func TestReadSessionResumesAfterTheLastRecord(t *testing.T) {
	var sessions atomic.Int64
	url := lossyServer(t, func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Path, "/ReadSession") && sessions.Add(1) <= 3
	})
	ctx := context.Background()
	c := newStream(t, url)
	for i := range 10 {
		if _, err := c.Append(ctx, "s", []client.Record{{Body: fmt.Appendf(nil, "r%d", i)}}, client.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var resumed int
	rs, err := c.OpenReadSession(ctx, "s", client.FromSeq(0), client.SessionOptions{Count: 10,
		OnResume: func(uint64, error) { resumed++ }})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rs.Next() {
		for _, r := range rs.Batch().Records {
			got = append(got, string(r.Body))
		}
	}
	if rs.Err() != nil {
		t.Fatal(rs.Err())
	}
	if len(got) != 10 || resumed == 0 {
		t.Fatalf("got %v after %d resumes", got, resumed)
	}
	for i, b := range got {
		if b != fmt.Sprintf("r%d", i) {
			t.Fatalf("record %d is %q: gap or repeat", i, b)
		}
	}
}

// TestProducerSessionRidesThroughDrops: the append session's connection
// drops three times mid-stream; the producer session reconnects, resends
// what is unacknowledged with the same batch seqs, and every batch is in
// the stream once, in order, each acked once.
func TestProducerSessionRidesThroughDrops(t *testing.T) {
	var sessions atomic.Int64
	url := lossyServer(t, func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Path, "/AppendSession") && sessions.Add(1) <= 3
	})
	ctx := context.Background()
	c := newStream(t, url)
	var reconnects atomic.Int64
	ps, err := c.OpenProducerSession(ctx, "s", client.ProducerOptions{OnReconnect: func(error) { reconnects.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	go func() {
		for i := range n {
			if err := ps.Submit([]client.Record{{Body: fmt.Appendf(nil, "r%d", i)}}); err != nil {
				t.Error(err)
				return
			}
		}
		_ = ps.CloseSend()
	}()
	var acks []client.Ack
	for a := range ps.Acks() {
		if a.Err != nil {
			t.Fatal(a.Err)
		}
		acks = append(acks, a.Ack)
	}
	if len(acks) != n || reconnects.Load() == 0 {
		t.Fatalf("%d acks after %d reconnects", len(acks), reconnects.Load())
	}
	for i, a := range acks {
		if a.StartSeq != uint64(i) || a.EndSeq != uint64(i+1) {
			t.Fatalf("ack %d is %d-%d", i, a.StartSeq, a.EndSeq)
		}
	}
	if ps.NextBatchSeq() != n {
		t.Fatalf("next batch seq %d", ps.NextBatchSeq())
	}
	tail, err := c.CheckTail(ctx, "s")
	if err != nil || tail.NextSeq != n {
		t.Fatalf("tail %d (%v): a resent batch was written twice", tail.NextSeq, err)
	}
}

// TestTailSessionCountsAcrossDrops: a TailSession resumes through the same
// code as a ReadSession (resumer): its connection drops mid-message three
// times; it reopens after the last record it delivered, tells OnEnd, and
// ends cleanly at its Count: every record once, in order.
func TestTailSessionCountsAcrossDrops(t *testing.T) {
	var sessions atomic.Int64
	url := lossyServer(t, func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Path, "/ReadSession") && sessions.Add(1) <= 3
	})
	ctx := context.Background()
	c := newStream(t, url)
	for i := range 20 {
		if _, err := c.Append(ctx, "s", []client.Record{{Body: fmt.Appendf(nil, "r%d", i)}}, client.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var ends int
	ts := c.OpenTailSession(ctx, "s", client.FromSeq(0), client.TailOptions{
		SessionOptions: client.SessionOptions{Count: 10}, OnEnd: func(error) { ends++ }, MaxBackoff: time.Millisecond})
	defer ts.Close()
	var got []string
	for ts.Next() {
		for _, r := range ts.Batch().Records {
			got = append(got, string(r.Body))
		}
	}
	if ts.Err() != nil {
		t.Fatal(ts.Err())
	}
	if len(got) != 10 || ends == 0 {
		t.Fatalf("got %v after %d ends, want r0 to r9 and at least one end", got, ends)
	}
	for i, b := range got {
		if b != fmt.Sprintf("r%d", i) {
			t.Fatalf("record %d is %q: gap or repeat", i, b)
		}
	}
}

// TestResourceExhaustedFollowsTheTable (issue 31): resource_exhausted is
// retriable when a retry can pass (a busy server, a session limit, a rate
// limit), and not when the request can never pass (over a size limit), as
// docs/api.md's error table says.
func TestResourceExhaustedFollowsTheTable(t *testing.T) {
	for msg, want := range map[string]bool{
		"server: busy: the server is reading 268435456 bytes of requests at once (at most 268435456); retry": true,
		"server: too many sessions: tenant 1234abcd... already has 1000 sessions open on this server":        true,
		"auth: too many lookups of unknown tokens; retry later":                                              true,
		"server: request too large: the body is 7000000 bytes (at most 6356992)":                             false,
		"message size 7000000 is larger than configured max 6291456":                                         false,
		"message is larger than configured max 65536 - unable to determine message size: EOF":                false,
		"server: append byte rate over quota: an append of 614400 bytes to \"a/s\": ...; retry in 1.2s":      true,
		"server: stream quota exceeded: create stream \"a/3\": tenant 1234abcd... has 2 streams":             false,
	} {
		if got := client.Retriable(connect.NewError(connect.CodeResourceExhausted, errors.New(msg))); got != want {
			t.Errorf("resource_exhausted %q: retriable %v, want %v", msg, got, want)
		}
	}
}

// TestSessionCountDeliveredThenConnectionLost is the regression test for
// `strand tail --count N` exiting on "connection lost mid-message" when
// strand dev was killed after the session delivered its N records but
// before its end of stream: the session is complete, and ends without an
// error (it failed before: the count reached ended it with the lost
// connection's error).
func TestSessionCountDeliveredThenConnectionLost(t *testing.T) {
	url, stop := startServerWith(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r)
			if strings.HasSuffix(r.URL.Path, "/ReadSession") {
				// Every record went out; the end of stream (gRPC's trailers)
				// does not: the connection drops.
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			}
		})
	})
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := newStream(t, url)
	for i := range 10 {
		if _, err := c.Append(ctx, "s", []client.Record{{Body: fmt.Appendf(nil, "r%d", i)}}, client.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tail := range []bool{false, true} {
		var resumed int
		opt := client.SessionOptions{Count: 10, OnResume: func(uint64, error) { resumed++ }}
		var s interface {
			Next() bool
			Batch() client.ReadBatch
			Err() error
			Close() error
		}
		if tail {
			s = c.OpenTailSession(ctx, "s", client.FromSeq(0), client.TailOptions{SessionOptions: opt, MaxBackoff: time.Millisecond})
		} else {
			rs, err := c.OpenReadSession(ctx, "s", client.FromSeq(0), opt)
			if err != nil {
				t.Fatal(err)
			}
			s = rs
		}
		var got int
		for s.Next() {
			got += len(s.Batch().Records)
		}
		s.Close()
		if got != 10 || s.Err() != nil || resumed != 0 {
			t.Fatalf("tail session %v: %d records, %d resumes, err %v; want 10, none, nil", tail, got, resumed, s.Err())
		}
	}
}
