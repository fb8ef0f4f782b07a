package absorb_test

import (
	"context"
	"errors"
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

// flakyHandler is a handler on an env with the given flights whose
// metastore fails chainX's next `fails` GetHeads, on a fake clock, with
// recorded visibility changes.
func flakyHandler(t *testing.T, flights int, fails int32) (*env, *fakeClock, *visibilities, *absorb.Handler) {
	var f *flaky
	e := newEnv(t, 2, func(s metastore.Store) metastore.Store { f = &flaky{Store: s}; return f })
	e.flights(flights)
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	vis := &visibilities{}
	f.fails.Store(fails)
	return e, clk, vis, &absorb.Handler{Absorber: e.a, Margin: absorb.Margin{Clock: clk}, Visibility: vis}
}

// TestHandlerRetriesTransientFailureInInvocation: a chain whose run fails
// transiently (the metastore unavailable twice) is retried inside the
// invocation, with a doubling backoff on the injected clock, and the batch
// succeeds: no message waits out the queue's visibility timeout.
// Regression test: it failed before the retry (the message was reported
// failed).
func TestHandlerRetriesTransientFailureInInvocation(t *testing.T) {
	e, clk, vis, h := flakyHandler(t, 4, 2)
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
	_, clk, vis, h := flakyHandler(t, 2, 1000)
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

// late moves the clock forward by jump on chainX's first GetHead once
// armed: the chain's run takes the invocation into its deadline margin.
type late struct {
	metastore.Store
	clk   *fakeClock
	jump  time.Duration
	armed atomic.Bool
}

func (l *late) GetHead(ctx context.Context, c metastore.ChainID) (metastore.Head, error) {
	if c == chainX && l.armed.CompareAndSwap(true, false) {
		func() {
			l.clk.mu.Lock()
			l.clk.now = l.clk.now.Add(l.jump)
			l.clk.mu.Unlock()
		}()
	}
	return l.Store.GetHead(ctx, c)
}

// TestHandlerStopsStartingWithinDeadlineMargin: the first chain's run
// takes the invocation within its deadline margin, so the next chain is
// not started: its messages are reported failed and made visible at once
// (nothing failed), while the first chain's succeeded. A sweep started
// within the margin runs nothing and says so. Regression test: it failed
// before the margin (the second chain ran into the deadline).
func TestHandlerStopsStartingWithinDeadlineMargin(t *testing.T) {
	clk := &fakeClock{now: time.Now()}
	var l *late
	e := newEnv(t, 2, func(s metastore.Store) metastore.Store { l = &late{Store: s, clk: clk, jump: time.Hour}; return l })
	e.flights(3)
	l.armed.Store(true)
	other := metastore.ChainID{Star: "star-1", Class: metastore.Express}
	ctx, cancel := context.WithDeadline(t.Context(), clk.now.Add(time.Hour+absorb.DefaultMargin/2))
	defer cancel()
	vis := &visibilities{}
	h := &absorb.Handler{Absorber: e.a, Margin: absorb.Margin{Clock: clk, Finish: -1}, Visibility: vis}
	second := events.SQSMessage{MessageId: "m2", ReceiptHandle: "rh-m2", EventSourceARN: "q",
		Body: string(absorb.NewEvent(other, cur(1, 1)).Marshal())}
	resp, err := h.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{releaseMsg("m1", cur(1, 3), "1"), second}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m2" {
		t.Fatalf("failures %+v, want only m2 (not started)", resp.BatchItemFailures)
	}
	if d, ok := vis.got["q|rh-m2"]; !ok || d != 0 || len(vis.got) != 1 {
		t.Fatalf("visibility changes %v, want m2 visible at once", vis.got)
	}
	if got := e.head().Checkpoint; got != cur(1, 3) {
		t.Fatalf("checkpoint %s, want 1/3 (the first chain ran)", got)
	}
	h.Chains = []metastore.ChainID{chainX}
	if err := h.Sweep(ctx); !errors.Is(err, absorb.ErrMargin) {
		t.Fatalf("sweep within the margin: %v, want ErrMargin", err)
	}
}

// TestSweepWithinMarginStartsNothing: the sweep settle and trim run starts
// no chain within the default deadline margin and reports ErrMargin;
// without a deadline every chain runs.
func TestSweepWithinMarginStartsNothing(t *testing.T) {
	chains := []metastore.ChainID{chainX, {Star: "star-1", Class: metastore.Express}}
	ran := 0
	run := func(context.Context, metastore.ChainID) error { ran++; return nil }
	ctx, cancel := context.WithTimeout(t.Context(), absorb.DefaultMargin/2)
	defer cancel()
	if err := absorb.Sweep(ctx, chains, nil, "settle", run); !errors.Is(err, absorb.ErrMargin) || ran != 0 {
		t.Fatalf("within the margin: %v after %d runs, want ErrMargin and none", err, ran)
	}
	if err := absorb.Sweep(t.Context(), chains, nil, "settle", run); err != nil || ran != 2 {
		t.Fatalf("no deadline: %v after %d runs, want both", err, ran)
	}
}
