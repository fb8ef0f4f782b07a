package absorb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/strandlog/strand/shared/metastore"
)

// Handler is the absorb Lambda's handler. Its dependencies are injected;
// nothing in it needs the Lambda runtime.
type Handler struct {
	Absorber *Absorber
	// Chains are the chains a scheduled sweep absorbs.
	Chains []metastore.ChainID
	// Log: nil is slog.Default().
	Log *slog.Logger
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
// redelivers only those.
func (h *Handler) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	fail := func(id string) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	type work struct {
		head metastore.Cursor
		ids  []string
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
		w.ids = append(w.ids, m.MessageId)
	}
	for _, c := range order {
		w := byChain[c]
		at, err := h.Absorber.Run(ctx, c, w.head)
		if err != nil {
			h.log().Error("absorb: run failed", "chain", c.String(), "released", w.head.String(), "checkpoint", at.String(), "err", err)
			for _, id := range w.ids {
				fail(id)
			}
		}
	}
	return resp, nil
}

// Sweep absorbs every configured chain up to its last committed slot. A
// chain that was never minted is skipped; errors are joined.
func (h *Handler) Sweep(ctx context.Context) error {
	var errs []error
	for _, c := range h.Chains {
		if _, err := h.Absorber.Run(ctx, c, metastore.Cursor{}); err != nil {
			if errors.Is(err, metastore.ErrNotFound) {
				continue
			}
			h.log().Error("absorb: sweep failed", "chain", c.String(), "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
