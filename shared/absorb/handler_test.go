package absorb_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/metastore"
)

// flaky fails GetHead of chainX with metastore.ErrUnavailable while
// fails > 0.
type flaky struct {
	metastore.Store
	fails atomic.Int32
}

func (f *flaky) GetHead(ctx context.Context, c metastore.ChainID) (metastore.Head, error) {
	if c == chainX && f.fails.Add(-1) >= 0 {
		return metastore.Head{}, metastore.ErrUnavailable
	}
	return f.Store.GetHead(ctx, c)
}

// fakeClock fires every timer at once and records the pauses asked for.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	pauses []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pauses = append(c.pauses, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *fakeClock) Sleep(d time.Duration) { <-c.After(d) }

// visibilities records ChangeVisibility calls.
type visibilities struct {
	mu  sync.Mutex
	got map[string]time.Duration // receipt handle -> visibility
}

func (v *visibilities) ChangeVisibility(_ context.Context, arn, receipt string, d time.Duration) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.got == nil {
		v.got = map[string]time.Duration{}
	}
	v.got[arn+"|"+receipt] = d
	return nil
}

func releaseMsg(id string, head metastore.Cursor, receives string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, ReceiptHandle: "rh-" + id, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:release.fifo",
		Body: string(absorb.NewEvent(chainX, head).Marshal()), Attributes: map[string]string{"ApproximateReceiveCount": receives}}
}

// TestHandlerRetriesTransientFailureInInvocation: a chain whose run fails
// transiently (the metastore unavailable twice) is retried inside the
// invocation, with a doubling backoff on the injected clock, and the batch
// succeeds: no message waits out the queue's visibility timeout.
// Regression test: it failed before the retry (the message was reported
// failed).
func TestHandlerRetriesTransientFailureInInvocation(t *testing.T) {
	var f *flaky
	e := newEnv(t, 2, func(s metastore.Store) metastore.Store { f = &flaky{Store: s}; return f })
	e.flights(4)
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	vis := &visibilities{}
	h := &absorb.Handler{Absorber: e.a, Margin: absorb.Margin{Clock: clk}, Visibility: vis}
	f.fails.Store(2)
	resp, err := h.HandleSQS(t.Context(), events.SQSEvent{Records: []events.SQSMessage{releaseMsg("m1", cur(1, 4), "1")}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("response %+v, %v: the transient failure was not retried", resp, err)
	}
	if got := e.head().Checkpoint; got != cur(1, 4) {
		t.Fatalf("checkpoint %s, want 1/4", got)
	}
	if len(clk.pauses) != 2 || clk.pauses[0] != absorb.DefaultRetry.Backoff || clk.pauses[1] != 2*absorb.DefaultRetry.Backoff {
		t.Fatalf("backoff pauses %v, want %v then twice that", clk.pauses, absorb.DefaultRetry.Backoff)
	}
	if len(vis.got) != 0 {
		t.Fatalf("visibility changed for a batch that succeeded: %v", vis.got)
	}
	e.check()
}

// TestHandlerReturnsFailedChainEarly: a chain still failing after its
// retries has every message reported failed and made visible again after
// DefaultRedeliver, doubled per earlier receive; a permanent failure (a
// chain with no bucket set) is not retried. Regression test: before the
// fix nothing changed the visibility (the FIFO group waited 360 s).
func TestHandlerReturnsFailedChainEarly(t *testing.T) {
	var f *flaky
	e := newEnv(t, 2, func(s metastore.Store) metastore.Store { f = &flaky{Store: s}; return f })
	e.flights(2)
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	vis := &visibilities{}
	h := &absorb.Handler{Absorber: e.a, Margin: absorb.Margin{Clock: clk}, Visibility: vis}
	f.fails.Store(1000)
	standard := events.SQSMessage{MessageId: "std", ReceiptHandle: "rh-std", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:release.fifo",
		Body: `{"star":"star-0","class":"standard","epoch":1,"slot":3}`}
	resp, err := h.HandleSQS(t.Context(), events.SQSEvent{Records: []events.SQSMessage{
		releaseMsg("m1", cur(1, 1), "1"), releaseMsg("m2", cur(1, 2), "3"), standard}})
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, x := range resp.BatchItemFailures {
		failed[x.ItemIdentifier] = true
	}
	if len(failed) != 3 {
		t.Fatalf("failures %+v, want m1, m2, std", resp.BatchItemFailures)
	}
	if n := len(clk.pauses); n != absorb.DefaultRetry.Attempts-1 {
		t.Fatalf("%d backoff pauses, want %d (the permanent failure is not retried)", n, absorb.DefaultRetry.Attempts-1)
	}
	arn := "arn:aws:sqs:us-east-1:123456789012:release.fifo|"
	want := map[string]time.Duration{arn + "rh-m1": absorb.DefaultRedeliver, arn + "rh-m2": 4 * absorb.DefaultRedeliver, arn + "rh-std": absorb.DefaultRedeliver}
	for k, d := range want {
		if vis.got[k] != d {
			t.Fatalf("visibility of %s: %v, want %v (all: %v)", k, vis.got[k], d, vis.got)
		}
	}
}
