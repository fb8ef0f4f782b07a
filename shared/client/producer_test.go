package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
)

// within fails the test if f does not return in d (a deadlock).
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return in %v: deadlocked", what, d)
	}
}

// openProducer starts a server with stream "s" and opens a producer
// session on it; both end with the test.
func openProducer(t *testing.T) (*client.Client, *client.ProducerSession) {
	t.Helper()
	url, stop := startServer()
	t.Cleanup(stop)
	c := newStream(t, url)
	ps, err := c.OpenProducerSession(context.Background(), "s", client.ProducerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ps.Close) // before stop: cleanups run last first
	return c, ps
}

// TestSubmitWithoutReadingAcks: Submit never waits for the caller to read
// Acks; the acks wait in order for a late reader. Issue 34: with Acks not
// drained, Submit blocked forever after ProducerWindow + 9 batches (before
// the fix this test timed out at batch 17).
func TestSubmitWithoutReadingAcks(t *testing.T) {
	_, ps := openProducer(t)
	const n = 60
	within(t, 20*time.Second, "Submit of 60 batches with Acks unread", func() {
		for i := range n {
			if err := ps.Submit([]client.Record{{Body: fmt.Appendf(nil, "r%d", i)}}); err != nil {
				t.Errorf("submit %d: %v", i, err)
				return
			}
		}
		_ = ps.CloseSend()
	})
	var got int
	within(t, 20*time.Second, "reading Acks late", func() {
		for a := range ps.Acks() {
			if a.Err != nil || a.StartSeq != uint64(got) {
				t.Errorf("ack %d: %+v", got, a)
				return
			}
			got++
		}
	})
	if got != n {
		t.Fatalf("%d acks, want %d", got, n)
	}
}

// TestAppendFutures: Append's futures resolve on the session's goroutine
// with nothing read; Flush waits for them all; a refused batch's future
// and every later Append get the error.
func TestAppendFutures(t *testing.T) {
	c, ps := openProducer(t)
	ctx := context.Background()
	var fs []*client.Future
	within(t, 20*time.Second, "Append of 60 batches, futures unread", func() {
		for i := range 60 {
			f, err := ps.Append([]client.Record{{Body: fmt.Appendf(nil, "r%d", i)}, {Body: []byte("x")}})
			if err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
			fs = append(fs, f)
		}
		if err := ps.Flush(ctx); err != nil {
			t.Errorf("flush: %v", err)
		}
	})
	for i, f := range fs {
		select {
		case <-f.Done():
		default:
			t.Fatalf("future %d not resolved after Flush", i)
		}
		a, err := f.Wait(ctx)
		if err != nil || a.StartSeq != uint64(2*i) || a.EndSeq != uint64(2*i+2) {
			t.Fatalf("future %d: %+v %v", i, a, err)
		}
	}
	// The stream is fenced: the next batch is refused, and the session
	// with it.
	if _, err := c.Fence(ctx, "s", "tok", client.FenceOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := ps.Append([]client.Record{{Body: []byte("refused")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(ctx); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("refused batch's future: %v, want failed_precondition", err)
	}
	if _, err := ps.Append([]client.Record{{Body: []byte("after")}}); err == nil {
		t.Fatal("Append after the session failed succeeded")
	}
	if err := ps.Flush(ctx); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("Flush after the failure: %v", err)
	}
}

// TestRecordsIterator: the iterator yields every record once, stops when
// the loop breaks, follows the tail without NoTail, and yields an error
// once.
func TestRecordsIterator(t *testing.T) {
	url, stop := startServer()
	defer stop()
	c := newStream(t, url)
	ctx := context.Background()
	for i := range 5 {
		if _, err := c.Append(ctx, "s", []client.Record{{Body: fmt.Appendf(nil, "r%d", i)}}, client.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for r, err := range c.Records(ctx, "s", client.FromSeq(1), client.SessionOptions{NoTail: true}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(r.Body))
	}
	if fmt.Sprint(got) != "[r1 r2 r3 r4]" {
		t.Fatalf("read %v", got)
	}
	// Following the tail: a record appended later arrives; break ends it.
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = c.Append(ctx, "s", []client.Record{{Body: []byte("late")}}, client.AppendOptions{})
	}()
	n := 0
	for r, err := range c.Records(tctx, "s", client.FromTail(1), client.SessionOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if string(r.Body) == "late" {
			break
		}
	}
	if n != 2 {
		t.Fatalf("tailing read yielded %d records before late, want r4 and late", n)
	}
	var errs int
	for _, err := range c.Records(ctx, "nope", client.FromSeq(0), client.SessionOptions{NoTail: true}) {
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("missing stream: %v", err)
		}
		errs++
	}
	if errs != 1 {
		t.Fatalf("%d errors yielded, want 1", errs)
	}
}

// TestAcksAbandoned: a caller that asks for Acks, reads one and walks
// away leaves nothing running once it closes the session (goleak checks
// the package's goroutines at its end).
func TestAcksAbandoned(t *testing.T) {
	_, ps := openProducer(t)
	acks := ps.Acks()
	for i := range 5 {
		if err := ps.Submit([]client.Record{{Body: fmt.Appendf(nil, "r%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if a := <-acks; a.Err != nil || a.StartSeq != 0 {
		t.Fatalf("first ack %+v", a)
	}
	if err := ps.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ps.Close()
}
