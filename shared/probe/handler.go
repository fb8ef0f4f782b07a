package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// DefaultSweepEpochs is how many epoch numbers below a chain's current epoch
// a scheduled sweep probes.
const DefaultSweepEpochs = 8

// MaxReported caps the orphan keys a sweep returns and logs (the count is
// always exact).
const MaxReported = 1000

// ScheduledDetailType is the detail-type of an EventBridge scheduled event.
const ScheduledDetailType = "Scheduled Event"

// Handler is the probe Lambda's handler, with its dependencies injected.
type Handler struct {
	// Sets is the bucket set of every chain the probe serves; the sweep
	// probes exactly these chains.
	Sets map[metastore.ChainID]chain.Set
	Meta metastore.Store
	// Settled is the settled bucket, listed for the orphan report by the
	// sweep; nil skips the report.
	Settled objstore.Bucket
	Log     *slog.Logger
	// SweepEpochs: epoch numbers below the current one a sweep probes (0:
	// DefaultSweepEpochs).
	SweepEpochs int
	// OrphanGrace is how long a settled object must stay a deletable orphan
	// (sweep after sweep) before a sweep deletes it: 0 is
	// DefaultOrphanGrace, negative never deletes (report only).
	OrphanGrace time.Duration
	// Clock reads now for the grace period; nil is the real clock.
	Clock clock.Clock
	// Margin: no probe starts within it of the invocation's deadline (zero
	// value: absorb.DefaultMargin on the real clock).
	Margin absorb.Margin
	// PassIndex: the absorb writes pass indexes (design 014) in Settled;
	// the orphan report counts a stream's parts in every served chain's
	// window as in transit (passindex.Window.ChainsLookup; from where
	// each chain's indexed passes begin, so a chain still in refs mode is
	// fine). Without it, an orphan sweep over a chain whose passes are
	// indexed (Head.Indexed) is refused: absorb.ErrIndexed.
	PassIndex bool
	// Window is the pass index window cache the orphan report reads
	// (PassIndex; nil: a fresh one per sweep, with
	// passindex.DefaultWindowCacheBytes). Its MaxBytes must fit the process.
	Window *passindex.Window
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (h *Handler) prober() *Prober { return &Prober{Meta: h.Meta, Log: h.log()} }

// Probe probes one fenced epoch with its chain's set.
func (h *Handler) Probe(ctx context.Context, ev FenceEvent) (Result, error) {
	c, err := ev.Chain()
	if err != nil {
		return Result{}, err
	}
	set, ok := h.Sets[c]
	if !ok {
		return Result{}, fmt.Errorf("%w: %s", ErrUnknownChain, c)
	}
	return h.prober().Probe(ctx, set, ev)
}

// Handle is the Lambda entry point. It dispatches on the event's shape: an
// SQS batch ("Records") of fence events, answered with an
// events.SQSEventResponse naming the failed messages; an EventBridge event
// ("detail-type"): a scheduled event runs Sweep, any other carries a fence
// event as its detail; or a bare fence event (a direct invocation), which
// returns its Result.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var shape struct {
		Records    json.RawMessage `json:"Records"`
		DetailType *string         `json:"detail-type"`
		Star       *string         `json:"star"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	switch {
	case shape.Records != nil:
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("%w: SQS event: %v", ErrEvent, err)
		}
		return h.HandleSQS(ctx, ev)
	case shape.DetailType != nil:
		var ev events.CloudWatchEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("%w: EventBridge event: %v", ErrEvent, err)
		}
		return h.HandleEventBridge(ctx, ev)
	case shape.Star != nil:
		ev, err := ParseFenceEvent(raw)
		if err != nil {
			return nil, err
		}
		return h.Probe(ctx, ev)
	}
	return nil, fmt.Errorf("%w: unrecognised event %.200s", ErrEvent, raw)
}

// HandleEventBridge runs the sweep for a scheduled event and probes the
// fence event carried as the detail of any other event.
func (h *Handler) HandleEventBridge(ctx context.Context, ev events.CloudWatchEvent) (any, error) {
	if ev.DetailType == ScheduledDetailType {
		return h.Sweep(ctx)
	}
	fe, err := ParseFenceEvent(ev.Detail)
	if err != nil {
		return nil, fmt.Errorf("event %s (%s): %w", ev.ID, ev.DetailType, err)
	}
	return h.Probe(ctx, fe)
}

// HandleSQS probes the fence event in each message's body (a bare fence
// event, or an EventBridge event carrying one, as an EventBridge rule with
// an SQS target delivers it). Messages that fail, malformed ones included,
// are reported in BatchItemFailures so only they are redelivered (and a
// malformed one ends in the dead-letter queue); the batch itself never
// fails. No probe starts within the deadline margin: the messages left are
// reported failed, so a slow probe cannot time the whole batch out.
func (h *Handler) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for i, m := range ev.Records {
		if !h.Margin.Open(ctx) {
			// Not started: redelivered after the visibility timeout (a
			// standard queue; fence events do not block one another).
			h.log().Warn("probe: messages not started, within the invocation's deadline margin", "messages", len(ev.Records)-i)
			for _, m := range ev.Records[i:] {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			}
			break
		}
		fe, err := fenceEventOf([]byte(m.Body))
		if err == nil {
			_, err = h.Probe(ctx, fe)
		}
		if err != nil {
			h.log().Error("probe: message failed", "messageId", m.MessageId, "err", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

// fenceEventOf decodes a message body: a fence event or an EventBridge
// event whose detail is one.
func fenceEventOf(body []byte) (FenceEvent, error) {
	var shape struct {
		DetailType *string         `json:"detail-type"`
		Detail     json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal(body, &shape); err != nil {
		return FenceEvent{}, fmt.Errorf("%w: %v", ErrEvent, err)
	}
	if shape.DetailType != nil {
		return ParseFenceEvent(shape.Detail)
	}
	return ParseFenceEvent(body)
}

// SweepReport is what a scheduled sweep did.
type SweepReport struct {
	Probes      []Result `json:"probes"`
	Orphans     []string `json:"orphans,omitempty"` // at most MaxReported
	OrphanCount int      `json:"orphanCount"`
	// OrphansDeleted: orphans deleted by this sweep (deletable, and first
	// seen at least OrphanGrace ago).
	OrphansDeleted []string `json:"orphansDeleted,omitempty"`
	Unparsed       []string `json:"unparsed,omitempty"` // keys under streams/ that are not settled keys
}

// Sweep probes, for every chain in Sets (in chain order), the fenced epochs
// below the chain's current one (at most SweepEpochs epoch numbers down):
// each is read from the metastore (GetEpoch), and one in state
// EpochFenced is probed above its cut with its minted window. Epoch numbers
// never minted are skipped; an epoch below the current one that is not
// fenced is logged and skipped (it has no cut). Then, with a settled
// bucket, it lists streams/ (a tool path: listing is allowed here),
// reports the settled objects no ref points to (Orphans), and deletes the
// ones that have been deletable for OrphanGrace (see collect). It goes on past a
// failing chain and returns the report with the errors joined.
func (h *Handler) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	var errs []error
	chains := make([]metastore.ChainID, 0, len(h.Sets))
	for c := range h.Sets {
		chains = append(chains, c)
	}
	slices.SortFunc(chains, func(a, b metastore.ChainID) int {
		if a.Star != b.Star {
			if a.Star < b.Star {
				return -1
			}
			return 1
		}
		return int(a.Class) - int(b.Class)
	})
	depth := h.SweepEpochs
	if depth <= 0 {
		depth = DefaultSweepEpochs
	}
	for i, c := range chains {
		if !h.Margin.Open(ctx) {
			errs = append(errs, fmt.Errorf("probe: %d chains from %s: %w", len(chains)-i, c, absorb.ErrMargin))
			break
		}
		head, err := h.Meta.GetHead(ctx, c)
		if errors.Is(err, metastore.ErrNotFound) {
			continue // never minted
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("probe: head of %s: %w", c, err))
			continue
		}
		low := uint64(1)
		if head.Epoch > uint64(depth) {
			low = head.Epoch - uint64(depth)
		}
		for e := head.Epoch - 1; e >= low && e > 0; e-- {
			rec, err := h.Meta.GetEpoch(ctx, c, e)
			if errors.Is(err, metastore.ErrNotFound) {
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("probe: epoch %d of %s: %w", e, c, err))
				continue
			}
			if rec.State != metastore.EpochFenced {
				h.log().Warn("probe: superseded epoch not fenced; skipped", "chain", c.String(), "epoch", e)
				continue
			}
			res, err := h.prober().Probe(ctx, h.Sets[c], FenceEvent{Star: c.Star, Class: c.Class.String(), Epoch: e, Cut: rec.Cut})
			rep.Probes = append(rep.Probes, res)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if h.Settled != nil {
		if err := h.collect(ctx, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}
