package wake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metrics"
	"github.com/strandlog/strand/shared/star"
)

// Observer is what the star exposes to hear of checkpoint moves.
type Observer interface {
	Absorbed(chain metastore.ChainID, cur metastore.Cursor)
}

// SlowCall is how long a metastore round trip may take before the
// metastore counts as slow for stall diagnosis.
const SlowCall = 500 * time.Millisecond

// health tracks the absorb's recent view of the metastore per chain.
type health struct {
	mu   sync.Mutex
	slow map[metastore.ChainID]bool
}

func (h *health) set(c metastore.ChainID, slow bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.slow == nil {
		h.slow = map[metastore.ChainID]bool{}
	}
	h.slow[c] = slow
}

// Health is the star's AbsorbHealth hook.
func (h *health) Health(c metastore.ChainID) star.AbsorbHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	return star.AbsorbHealth{MetastoreSlow: h.slow[c]}
}

func metastoreTrouble(err error, took time.Duration) bool {
	return errors.Is(err, metastore.ErrUnavailable) || took > SlowCall
}

// Local runs the absorb in-process. Create with NewLocal, start Run, and
// pass it to the star as its Waker.
type Local struct {
	health
	abs   *absorb.Absorber
	obs   Observer
	clk   clock.Clock
	log   *slog.Logger
	mu    sync.Mutex
	heads map[metastore.ChainID]metastore.Cursor
	kick  chan struct{}
}

// NewLocal builds a Local waker; obs (the star) may be set later with
// SetObserver, before Run.
func NewLocal(abs *absorb.Absorber, clk clock.Clock, log *slog.Logger) *Local {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Local{abs: abs, clk: clock.OrReal(clk), log: log, heads: map[metastore.ChainID]metastore.Cursor{}, kick: make(chan struct{}, 1)}
}

// SetObserver sets who hears of checkpoint moves.
func (l *Local) SetObserver(o Observer) { l.obs = o }

// Released records the chain's latest released head and wakes Run. It
// never fails.
func (l *Local) Released(_ context.Context, c metastore.ChainID, head metastore.Cursor) error {
	l.mu.Lock()
	if old, ok := l.heads[c]; !ok || old.Less(head) {
		l.heads[c] = head
	}
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return nil
}

// Run absorbs toward the latest released heads until ctx ends, and sweeps
// every `sweep` (0: never) for chains it was told of.
func (l *Local) Run(ctx context.Context, sweep time.Duration) {
	var tick <-chan time.Time
	for {
		if sweep > 0 {
			tick = l.clk.After(sweep)
		}
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-tick:
		}
		l.mu.Lock()
		todo := make(map[metastore.ChainID]metastore.Cursor, len(l.heads))
		for c, h := range l.heads {
			todo[c] = h
		}
		l.mu.Unlock()
		for c, h := range todo {
			l.once(ctx, c, h)
		}
	}
}

// once absorbs chain c toward head and reports the checkpoint.
func (l *Local) once(ctx context.Context, c metastore.ChainID, head metastore.Cursor) {
	start := l.clk.Now()
	at, err := l.abs.Run(ctx, c, head)
	l.set(c, metastoreTrouble(err, l.clk.Now().Sub(start)))
	if err != nil && ctx.Err() == nil {
		l.log.Warn("absorb failed; it will retry on the next release or sweep", "chain", c.String(), "err", err.Error())
	}
	if l.obs != nil && !at.IsZero() {
		l.obs.Absorbed(c, at)
	}
}

// DefaultSendTimeout bounds one release-event send: a hung SQS connection
// must not stall a chain's notifier (the star retries with its latest
// head).
const DefaultSendTimeout = 5 * time.Second

// SQS publishes release events to a FIFO queue.
type SQS struct {
	Client   *sqs.Client
	QueueURL string
	// Timeout bounds each send (0: DefaultSendTimeout).
	Timeout time.Duration
	// Metrics, when set, counts sends that hit Timeout:
	// strand_release_event_stalls_total{chain}.
	Metrics *metrics.Registry
	// Log: nil discards.
	Log *slog.Logger
}

// Released sends one absorb.Event. A failed send returns its error: the
// star retries with its latest head (events coalesce), and the absorb's
// scheduled sweep covers anything lost beyond that.
func (q *SQS) Released(ctx context.Context, c metastore.ChainID, head metastore.Cursor) error {
	return q.Send(ctx, c, head)
}

// Send publishes the event for chain's released head, within Timeout. A
// send that times out is logged and counted as a stalled notifier.
func (q *SQS) Send(ctx context.Context, c metastore.ChainID, head metastore.Cursor) error {
	timeout := q.Timeout
	if timeout <= 0 {
		timeout = DefaultSendTimeout
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ev := absorb.NewEvent(c, head)
	_, err := q.Client.SendMessage(sctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(q.QueueURL),
		MessageBody:            aws.String(string(ev.Marshal())),
		MessageGroupId:         aws.String(ev.GroupID()),
		MessageDeduplicationId: aws.String(fmt.Sprintf("%s-%d-%d", ev.Star+"-"+ev.Class, head.Epoch, head.Slot)),
	})
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded) {
		if q.Metrics != nil {
			q.Metrics.Counter("strand_release_event_stalls_total", "Release-event sends to SQS that did not answer within the send timeout.", "chain", c.String()).Inc()
		}
		if q.Log != nil {
			q.Log.Warn("release event send stalled; the star retries with its latest head", "chain", c.String(), "head", head.String(), "timeout", timeout.String())
		}
		return fmt.Errorf("wake: send release event of %s to %s: no answer within %s: %w", c, q.QueueURL, timeout, err)
	}
	return fmt.Errorf("wake: send release event of %s to %s: %w", c, q.QueueURL, err)
}

// Poller reads each chain's head periodically and tells the star its
// checkpoint (the absorb runs elsewhere, e.g. as a Lambda).
type Poller struct {
	health
	Meta     metastore.Store
	Chains   []metastore.ChainID
	Observer Observer
	Clock    clock.Clock
	Every    time.Duration
	Log      *slog.Logger
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	clk := clock.OrReal(p.Clock)
	every := p.Every
	if every <= 0 {
		every = time.Second
	}
	for {
		for _, c := range p.Chains {
			start := clk.Now()
			h, err := p.Meta.GetHead(ctx, c)
			p.set(c, metastoreTrouble(err, clk.Now().Sub(start)))
			if err != nil {
				if ctx.Err() == nil && p.Log != nil {
					p.Log.Warn("read chain head", "chain", c.String(), "err", err.Error())
				}
				continue
			}
			p.Observer.Absorbed(c, h.Checkpoint)
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(every):
		}
	}
}
