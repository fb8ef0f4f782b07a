package absorb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/strandlog/strand/shared/metastore"
)

// Visibility returns received SQS messages to their queue early: a FIFO
// message group stays blocked while one of its messages is in flight, so a
// failed chain must not wait out the queue's visibility timeout.
type Visibility interface {
	// ChangeVisibility makes the message received with receiptHandle from
	// the queue queueARN visible again after d (0: at once).
	ChangeVisibility(ctx context.Context, queueARN, receiptHandle string, d time.Duration) error
}

// DefaultRedeliver is how soon a release event of a chain whose run failed
// is redelivered after its first receive; it doubles with each receive
// (ApproximateReceiveCount) up to MaxRedeliver, so a lasting outage still
// reaches the dead-letter queue (after its maxReceiveCount receives) while
// a transient one costs seconds instead of the queue's 360 s timeout.
const (
	DefaultRedeliver = 5 * time.Second
	MaxRedeliver     = 2 * time.Minute
)

// redeliverAfter is the visibility a failed message gets: 0 for work never
// started (nothing failed), else DefaultRedeliver doubled per earlier
// receive.
func redeliverAfter(m events.SQSMessage, started bool, first time.Duration) time.Duration {
	if !started {
		return 0
	}
	n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		n = 1
	}
	d := first
	if d <= 0 {
		d = DefaultRedeliver
	}
	for i := 1; i < n && d < MaxRedeliver; i++ {
		d *= 2
	}
	return min(d, MaxRedeliver)
}

// Handler is the absorb Lambda's handler. Its dependencies are injected;
// nothing in it needs the Lambda runtime.
type Handler struct {
	Absorber *Absorber
	// Chains are the chains a scheduled sweep absorbs.
	Chains []metastore.ChainID
	// Log: nil is slog.Default().
	Log *slog.Logger
	// Retry: how a failed chain run is retried inside the invocation (zero:
	// DefaultRetry).
	Retry Retry
	// Margin: when the invocation stops starting chain runs (zero value:
	// DefaultMargin, DefaultFinish, the real clock, which also times the
	// retry backoff).
	Margin Margin
	// Visibility returns a failed chain's messages to the queue early (nil:
	// they wait out the queue's visibility timeout).
	Visibility Visibility
	// Redeliver: the visibility of a failed message at its first receive
	// (0: DefaultRedeliver); it doubles per receive up to MaxRedeliver.
	Redeliver time.Duration
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

// Handle is the Lambda entry point. It takes the raw event and dispatches
// on its shape: an SQS batch (a "Records" array) of release events, a
// scheduled EventBridge event ("detail-type"), or a bare release event (a
// direct invocation, as `strand dev` makes). For SQS it returns an
// events.SQSEventResponse naming the failed messages; a scheduled sweep
// returns nil, or an error if some chain failed.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Records    json.RawMessage `json:"Records"`
		DetailType *string         `json:"detail-type"`
		Star       *string         `json:"star"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("absorb: event: %w", err)
	}
	switch {
	case probe.Records != nil:
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("absorb: SQS event: %w", err)
		}
		return h.HandleSQS(ctx, ev)
	case probe.DetailType != nil:
		return nil, h.Sweep(ctx)
	case probe.Star != nil:
		e, err := ParseEvent(raw)
		if err != nil {
			return nil, err
		}
		c, _ := e.Chain()
		_, err = h.Absorber.Run(ctx, c, e.Released())
		return nil, err
	}
	return nil, fmt.Errorf("absorb: unrecognised event %.200s", raw)
}

// HandleSQS absorbs the chains a batch of release events names: one Run
// per chain, up to the highest released head among its messages (events
// coalesce). It never fails the whole batch: a message that does not parse,
// or whose chain's run failed, is reported in BatchItemFailures (all of
// that chain's messages, which keeps a FIFO group in order), and SQS
// redelivers only those. A chain's run is retried inside the invocation
// while it fails transiently (Retry); a chain still failing has its
// messages made visible again within seconds (Visibility), not after the
// queue's timeout. No chain run starts within the deadline margin
// (Margin): those chains' messages are reported failed and made visible at
// once, so a slow chain cannot time the whole batch out.
func (h *Handler) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	fail := func(id string) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	type work struct {
		head metastore.Cursor
		msgs []events.SQSMessage
	}
	var order []metastore.ChainID
	byChain := make(map[metastore.ChainID]*work)
	for _, m := range ev.Records {
		e, err := ParseEvent([]byte(m.Body))
		if err != nil {
			h.log().Error("absorb: malformed release event", "messageId", m.MessageId, "err", err)
			fail(m.MessageId)
			continue
		}
		c, _ := e.Chain()
		w := byChain[c]
		if w == nil {
			w = &work{}
			byChain[c] = w
			order = append(order, c)
		}
		if w.head.Less(e.Released()) {
			w.head = e.Released()
		}
		w.msgs = append(w.msgs, m)
	}
	for _, c := range order {
		w := byChain[c]
		var at metastore.Cursor
		started := h.Margin.Open(ctx)
		err := h.Retry.Do(ctx, h.Margin, func(ctx context.Context) error {
			var err error
			at, err = h.Absorber.Run(ctx, c, w.head)
			return err
		})
		if err == nil {
			continue
		}
		if errors.Is(err, ErrMargin) && !started {
			h.log().Warn("absorb: chain not started, within the deadline margin; redelivered", "chain", c.String(), "released", w.head.String())
		} else {
			h.log().Error("absorb: run failed", "chain", c.String(), "released", w.head.String(), "checkpoint", at.String(), "err", err)
		}
		for _, m := range w.msgs {
			fail(m.MessageId)
		}
		h.redeliver(ctx, w.msgs, started)
	}
	return resp, nil
}

// redeliver makes a failed chain's messages visible again soon (at once for
// work never started). A failure to do so is logged: the messages then
// wait out the queue's visibility timeout, as without Visibility.
func (h *Handler) redeliver(ctx context.Context, msgs []events.SQSMessage, started bool) {
	if h.Visibility == nil {
		return
	}
	// The invocation may be at its deadline: this call must still be made.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for _, m := range msgs {
		d := redeliverAfter(m, started, h.Redeliver)
		if err := h.Visibility.ChangeVisibility(ctx, m.EventSourceARN, m.ReceiptHandle, d); err != nil {
			h.log().Warn("absorb: could not return a failed message to its queue early", "messageId", m.MessageId, "err", err)
		}
	}
}

// Sweep absorbs every configured chain up to its last committed slot. A
// chain that was never minted is skipped; errors are joined. No chain
// starts within the deadline margin (ErrMargin is then among the errors).
func (h *Handler) Sweep(ctx context.Context) error {
	return h.Margin.Sweep(ctx, h.Chains, h.log(), "absorb sweep", func(ctx context.Context, c metastore.ChainID) error {
		_, err := h.Absorber.Run(ctx, c, metastore.Cursor{})
		return err
	})
}
