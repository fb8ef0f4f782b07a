package trim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/metastore"
)

// Handler is the trim Lambda's handler, with injected dependencies.
type Handler struct {
	Trimmer *Trimmer
	// Chains are the chains a scheduled run trims.
	Chains []metastore.ChainID
	// Log: nil is slog.Default().
	Log *slog.Logger
}

// Handle is the Lambda entry point: a scheduled EventBridge event
// ("detail-type") trims every configured chain, then applies retention and
// deletion to every stream. Any other event is refused.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		DetailType *string `json:"detail-type"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("trim: event: %w", err)
	}
	if probe.DetailType == nil {
		return nil, fmt.Errorf("trim: unrecognised event %.200s", raw)
	}
	return nil, h.Sweep(ctx)
}

// Sweep trims every configured chain and then the streams. One chain's
// failure does not stop the others; errors are joined.
func (h *Handler) Sweep(ctx context.Context) error {
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	errs := []error{absorb.Sweep(ctx, h.Chains, log, "trim", func(ctx context.Context, c metastore.ChainID) error {
		_, err := h.Trimmer.Run(ctx, c)
		return err
	})}
	res, err := h.Trimmer.Streams(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	log.Info("trim: streams", "streams", res.Streams, "deleted", res.Deleted, "refs", res.RefsDropped, "objects", res.Objects)
	return errors.Join(errs...)
}
