package settle

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/metastore"
)

// Handler is the settle Lambda's handler, with injected dependencies.
type Handler struct {
	Settler *Settler
	// Chains are the chains a scheduled run settles.
	Chains []metastore.ChainID
	// Log: nil is slog.Default().
	Log *slog.Logger
}

// ChainEvent is a direct invocation that settles one chain:
// {"star":"star-0","class":"express"}.
type ChainEvent struct {
	Star  string `json:"star"`
	Class string `json:"class"`
}

// Handle is the Lambda entry point: a scheduled EventBridge event
// ("detail-type") settles every configured chain; a ChainEvent settles one.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		DetailType *string `json:"detail-type"`
		ChainEvent
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("settle: event: %w", err)
	}
	switch {
	case probe.DetailType != nil:
		return nil, h.Sweep(ctx)
	case probe.Star != "":
		cl, err := metastore.ParseClass(probe.Class)
		if err != nil {
			return nil, fmt.Errorf("settle: event: %w", err)
		}
		_, err = h.Settler.Run(ctx, metastore.ChainID{Star: probe.Star, Class: cl})
		return nil, err
	}
	return nil, fmt.Errorf("settle: unrecognised event %.200s", raw)
}

// Sweep settles every configured chain up to its checkpoint (within the
// run's bounds). A chain never minted is skipped; errors are joined, and
// one chain's failure does not stop the others.
func (h *Handler) Sweep(ctx context.Context) error {
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	return absorb.Sweep(ctx, h.Chains, log, "settle", func(ctx context.Context, c metastore.ChainID) error {
		_, err := h.Settler.Run(ctx, c)
		return err
	})
}
