package star

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metrics"
)

// Errors returned to producers.
var (
	ErrUnknownStream = errors.New("star: stream not open on this star")
	ErrNotLeader     = errors.New("star: not leader")
	ErrClosed        = errors.New("star: closed")
	ErrNotStarted    = errors.New("star: not started")
	// ErrOutcomeUnknown: the batch was cut into a flight that may be
	// committed (it may already be at W copies, or a recovery or a
	// successor may yet keep it), and this star can no longer find out:
	// it is closing. A blind retry may write the batch twice; retry with
	// match_seq_num (or read the stream first). Batches that never left
	// the pool fail with plain ErrClosed: nothing of them was written.
	ErrOutcomeUnknown = errors.New("star: outcome unknown: the batch may be committed")
	// ErrHalted: the class's epoch has been halted for longer than
	// Config.HaltWait (its reason follows). A new append is refused with it
	// (nothing written); a batch admitted before fails with it and
	// ErrOutcomeUnknown (recovery may still commit it).
	ErrHalted = errors.New("star: epoch halted")
)

// SeqMismatchError rejects one batch whose match_seq_num missed; it carries
// the stream's acknowledged tail (every seq below it is durable). The
// answer waits for the stream's batches sequenced before the miss (see
// Submit), so the tail never covers a batch that is only sequenced.
type SeqMismatchError struct {
	Expected uint64
	Tail     uint64
}

func (e *SeqMismatchError) Error() string {
	return fmt.Sprintf("star: match_seq_num %d does not match the tail %d", e.Expected, e.Tail)
}

// Ack is what a producer gets back once its batch is durable: the batch's
// first and last seq, and the stream's acknowledged tail (next seq) and last
// timestamp after this release.
type Ack struct {
	FirstSeq  uint64
	LastSeq   uint64
	Tail      uint64
	LastTsMs  int64
	EndTsMs   int64 // timestamp of the batch's last record
	FirstTsMs int64
}

// Waker is told after every release that the chain's released head moved,
// so the absorb can run (SQS in AWS, an in-process call in strand dev). It
// is called from a background goroutine with coalesced heads, never on the
// ack path; it must not block for long. An error means the head was not
// delivered: the star retries with the latest head (with backoff) until one
// is.
type Waker interface {
	Released(ctx context.Context, chain metastore.ChainID, head metastore.Cursor) error
}

// StreamInfo opens a stream on the star: its id, class, and its tail as
// recovered from the metastore (next seq and last timestamp).
type StreamInfo struct {
	ID       format.StreamID
	Class    metastore.Class
	Next     uint64
	LastTsMs int64
	// Producers seed the dedupe table: each producer's latest batches as
	// recovered from refs (exactly-once appends across takeovers).
	Producers []ProducerState
	// Commands seeds the stream's command state (fencing token, trim
	// point, configuration) as recovered from its last ref; nil: none.
	Commands *format.StreamCommands
	// Config is the configuration the stream was created with (its
	// metastore record): it judges the stream's records until a config
	// command (Reconfigure) changes it; Commands' configuration, when set,
	// takes precedence.
	Config format.StreamConfig
}

type stream struct {
	id    format.StreamID
	class metastore.Class
	l     *loglet
	// guarded by l.mu
	next      uint64 // next seq to assign
	lastTs    int64  // last assigned timestamp
	ackedNext uint64 // acknowledged tail
	ackedTs   int64
	// indexed are this stream's batches in the flight index (released,
	// not yet absorbed), in seq order: reads of the tail window search it
	// instead of every flight of the loglet. Only ever appended to or
	// resliced from the front, never written in place: published views
	// alias it (see view).
	indexed []*batch
	// drained: Drain has taken the stream off the star; admission refuses it.
	// moving: a release has changed the stream and not yet called moved
	// (it calls it once per stream per flight).
	drained, moving bool
	// v is what readers see (Tail, ReadIndex, WatchStream), without l.mu,
	// through current. gen counts the changes of ackedNext, ackedTs and
	// indexed; a view shows one gen. The write path changes the four (and
	// v) with vmu held as well as l.mu, so that a reader rebuilds a stale
	// view under vmu alone, never waiting on the loglet's lock.
	v   atomic.Pointer[view]
	vmu sync.Mutex
	gen uint64
	// dd is the producer dedupe table (nil until a producer appends or
	// Open seeds it).
	dd *dedupe
	// cutMark, sinceCarry, carriedGen: the carried tables' cadence
	// (carry.go): the last flight cut with the stream, the stream's
	// flights since it last carried its table, and the loglet's carry
	// generation then (0: never, so the first flight after an open does).
	cutMark, sinceCarry, carriedGen uint64
	// queue holds the stream's pooled batches (pooled of them; see fair.go).
	queue  *tenantQueue
	pooled int
	// cmds is the command state as of the last sequenced record, ackedCmds
	// as of the acknowledged tail; hasCmds: the stream has command state,
	// so every segment of it carries cmds in its flight's command table.
	cmds, ackedCmds format.StreamCommands
	hasCmds         bool
	// cfg is the configuration in force at the next seq (timestamping,
	// retention): the stream's own, or the last config command's.
	cfg format.StreamConfig
}

// view is a stream's acked tail and flight index as readers see them. A
// view is never modified (but for stale): readers load it with one atomic
// read instead of taking the loglet's lock, which is the write path's (100
// tailing sessions took it four times per step each, and the releases
// queued behind them).
//
// A release or absorb does not build a view unless a reader waits on the
// stream (moved): it marks the current view stale, and the next reader
// builds the new one under the lock (current), once for every reader of
// that change. A release nobody watches allocates nothing; a release with a
// reader waiting publishes the new view and closes the wake channel itself,
// so a tailing session is woken by the release, with its view ready.
type view struct {
	gen     uint64 // the stream's gen this view shows
	next    uint64 // acked tail
	ts      int64  // its timestamp
	indexed []*batch
	// w's channel is closed when the acked tail moves past this view's (or
	// the stream is drained) while a reader holds it.
	w *wake
	// stale: the stream has moved on since (gen is behind); load through
	// current, which rebuilds it.
	stale atomic.Bool
}

// wake is a stream's wake-up channel, shared by its views until a release
// closes it.
type wake struct {
	ch chan struct{}
	// watched: a reader holds ch (WatchStream); a release that finds it
	// set closes ch and starts a new wake.
	watched atomic.Bool
}

// publish replaces the stream's view with one of its current state; wake
// closes the old view's channel (and starts a new one) whether or not
// anyone holds it. Called with vmu held.
func (st *stream) publish(wakeUp bool) {
	old := st.v.Load()
	nv := &view{gen: st.gen, next: st.ackedNext, ts: st.ackedTs, indexed: st.indexed}
	if old != nil && !wakeUp {
		nv.w = old.w
	} else {
		nv.w = &wake{ch: make(chan struct{})}
	}
	st.v.Store(nv)
	if old != nil && wakeUp {
		close(old.w.ch)
	}
}

// moved publishes a change of the stream's acked tail (wake) or of its
// flight index alone (an absorb: !wake), made (gen moved) with l.mu and
// vmu held; called with l.mu held. It builds a view and wakes only if a
// reader holds the wake channel; otherwise it marks the view stale,
// allocating nothing.
//
// Why no wake-up is lost: WatchStream sets w.watched and then reads
// stale; moved sets stale and then reads w.watched (sequentially
// consistent atomics). A reader that read stale unset is therefore seen as
// watching, and is woken here; a reader that read it set rebuilds the
// view and sees the new tail. A view rebuilt since the change (its gen is
// current) already shows the new tail to whoever reads it.
func (st *stream) moved(wake bool) {
	st.vmu.Lock()
	defer st.vmu.Unlock()
	old := st.v.Load()
	if old == nil {
		st.publish(false)
		return
	}
	if wake && old.w.watched.Load() {
		st.publish(true)
		return
	}
	if old.gen == st.gen {
		return
	}
	if movedHook != nil {
		movedHook()
	}
	old.stale.Store(true)
	if wake && old.w.watched.Load() {
		st.publish(true)
	}
}

// movedHook, set by tests only, runs in moved between its first look at
// watched and its marking the view stale: where a reader's WatchStream
// can take the old view's tail and channel.
var movedHook func()

// current returns the stream's view of its current state, rebuilding a
// stale one under vmu (never the loglet's lock).
func (st *stream) current() *view {
	v := st.v.Load()
	if !v.stale.Load() {
		return v
	}
	st.vmu.Lock()
	if v = st.v.Load(); v.gen != st.gen {
		st.publish(false)
		v = st.v.Load()
	}
	st.vmu.Unlock()
	return v
}

// dedupe returns the stream's producer table, creating it. Called with l.mu.
func (st *stream) dedupe(s *Star) *dedupe {
	if st.dd == nil {
		st.dd = newDedupe(s.cfg.DedupeWindow, s.cfg.ProducerIdle, s.cfg.MaxProducers, s.lru)
	}
	return st.dd
}

// Star is one star's write core: sequencer, pools, flushers, commit and
// ordered release, per class loglet. See doc.go.
type Star struct {
	cfg   Config
	clk   clock.Clock
	rand  io.Reader
	log   *slog.Logger
	meta  metastore.Store
	waker Waker
	reg   *metrics.Registry

	// absorbHealth, if set, reports the absorb's view of the metastore for
	// stall diagnosis; onHalt, if set, is told of every epoch halt.
	absorbHealth func(metastore.ChainID) AbsorbHealth
	onHalt       func(chain metastore.ChainID, epoch uint64, why error)
	// fencer builds the chain backend of a loglet; absorber catches a chain
	// up during takeover. Both optional (see Options).
	fencer   func(*loglet) Fencer
	absorber Absorber
	onFenced func(chain metastore.ChainID, epoch, cut uint64, window int)
	// lru bounds the producers of every stream's dedupe table together
	// (StarMaxProducers; dedupe.go).
	lru *producerLRU

	mu      sync.RWMutex
	streams map[format.StreamID]*stream
	loglets map[metastore.Class]*loglet
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	// movedAway are the streams sealed here for a move, by the star they
	// move to (move.go): once Drain takes one off, a call for it is
	// answered with *MovedError. Open forgets a stream's entry. Guarded
	// by mu.
	movedAway map[format.StreamID]string
}

// Options are the star's optional collaborators.
type Options struct {
	// Waker is told of every release (nil: nobody).
	Waker Waker
	// NewFencer builds the fencer of a loglet's bucket set; needed for
	// takeover and halt recovery.
	NewFencer func(star string, set ClassConfig) Fencer
	// Absorber catches a chain up to a predecessor's cut during takeover.
	Absorber Absorber
	// OnFenced, if set, is told of every epoch this star fences (the
	// garbage probe's trigger): the cut and the epoch's minted window. It is
	// called from the fencing goroutine and must not block for long.
	OnFenced func(chain metastore.ChainID, epoch, cut uint64, window int)
}

// New builds a star. meta is used at start-up (epochs, takeover) and
// during recovery, never between admission and ack.
func New(cfg Config, meta metastore.Store, opt Options) (*Star, error) {
	waker := opt.Waker
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Star{
		cfg:     cfg,
		clk:     clock.OrReal(cfg.Clock),
		rand:    cfg.Rand,
		log:     cfg.Logger,
		meta:    meta,
		waker:   waker,
		reg:     cfg.Metrics,
		streams: map[format.StreamID]*stream{}, movedAway: map[format.StreamID]string{},
		loglets: map[metastore.Class]*loglet{},
	}
	if opt.NewFencer != nil {
		s.fencer = func(l *loglet) Fencer { return opt.NewFencer(cfg.StarID, l.cfg) }
	}
	s.absorber = opt.Absorber
	s.onFenced = opt.OnFenced
	if s.rand == nil {
		s.rand = crand.Reader
	}
	if s.cfg.HaltWait == 0 {
		s.cfg.HaltWait = Defaults().HaltWait
	}
	if s.cfg.DedupeWindow <= 0 {
		s.cfg.DedupeWindow = DefaultDedupeWindow
	}
	if s.cfg.ProducerIdle <= 0 {
		s.cfg.ProducerIdle = DefaultProducerIdle
	}
	if s.cfg.MaxProducers <= 0 {
		s.cfg.MaxProducers = DefaultMaxProducers
	}
	if s.cfg.StarMaxProducers <= 0 {
		s.cfg.StarMaxProducers = DefaultStarMaxProducers
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.reg == nil {
		s.reg = metrics.NewRegistry()
	}
	s.lru = newProducerLRU(s.cfg.StarMaxProducers)
	s.lru.register(s.reg)
	for _, cl := range []metastore.Class{metastore.Standard, metastore.Express} {
		if cc := cfg.class(cl); cc.Enabled() {
			s.loglets[cl] = newLoglet(s, cl, cc)
		}
	}
	return s, nil
}

// Started reports whether Start completed and Close has not been called.
func (s *Star) Started() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.started
}

// Metrics is the star's metrics registry.
func (s *Star) Metrics() *metrics.Registry { return s.reg }

// ID is the star's id.
func (s *Star) ID() string { return s.cfg.StarID }

func (s *Star) newNonce() (format.Nonce, error) {
	var n format.Nonce
	if _, err := io.ReadFull(s.rand, n[:]); err != nil {
		return n, fmt.Errorf("star: draw writer nonce: %w", err)
	}
	return n, nil
}

// jitter draws a duration in [0, d/2) from the star's randomness.
func (s *Star) jitter(d time.Duration) time.Duration {
	var b [2]byte
	if _, err := io.ReadFull(s.rand, b[:]); err != nil || d <= 0 {
		return 0
	}
	return time.Duration(uint64(d/2) * uint64(binary.BigEndian.Uint16(b[:])) >> 16)
}

// Open makes a stream appendable on this star with its recovered tail. It
// is idempotent: opening an open stream keeps its live state.
func (s *Star) Open(info StreamInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.streams[info.ID]; ok {
		return nil
	}
	l := s.loglets[info.Class]
	if l == nil {
		return fmt.Errorf("star: stream %s is %s, but this star has no %s bucket set", info.ID, info.Class, info.Class)
	}
	st := &stream{id: info.ID, class: info.Class, l: l, next: info.Next, lastTs: info.LastTsMs, ackedNext: info.Next, ackedTs: info.LastTsMs}
	st.publish(false)
	if len(info.Producers) > 0 {
		st.dedupe(s).seed(info.Producers, s.clk.Now().UnixMilli())
	}
	st.cfg = info.Config
	if info.Commands != nil {
		cmds := *info.Commands
		s.unseal(&cmds) // sealed to this star: the move's new leader (move.go)
		st.cmds, st.ackedCmds, st.hasCmds = cmds, cmds, true
		if info.Commands.HasConfig {
			st.cfg = info.Commands.Config
		}
	}
	s.streams[info.ID] = st
	delete(s.movedAway, info.ID)
	return nil
}

// Drain takes a stream off the star for deletion. It refuses further
// appends to it, waits until every batch admitted for it is acknowledged
// and absorbed into refs (the absorb's checkpoint has passed its flights),
// and forgets it. After Drain returns nil, this star writes nothing more of
// the stream, so no ref for it appears after its metadata is gone. A
// stream not open here has nothing pending: Drain returns nil at once.
//
// If ctx ends first (the absorb is behind or down), the stream is restored
// unchanged, appends resume, and the error says what is still pending.
func (s *Star) Drain(ctx context.Context, id format.StreamID) error {
	s.mu.Lock()
	st := s.streams[id]
	delete(s.streams, id)
	s.mu.Unlock()
	if st == nil {
		return nil
	}
	l := st.l
	l.mu.Lock()
	st.drained = true
	st.vmu.Lock()
	st.publish(true)
	st.vmu.Unlock()
	for st.ackedNext != st.next || len(st.indexed) > 0 {
		if l.deposed != nil {
			err := l.deposed
			l.mu.Unlock()
			return fmt.Errorf("star: drain stream %s: %w", id, err)
		}
		if err := l.wait(ctx, nil); err != nil {
			unacked, unabsorbed := st.next-st.ackedNext, len(st.indexed)
			st.drained = false
			l.mu.Unlock()
			s.mu.Lock()
			if s.streams[id] == nil {
				s.streams[id] = st
			}
			s.mu.Unlock()
			return fmt.Errorf("star: drain stream %s: %d records not yet acknowledged, %d acknowledged batches not yet absorbed: %w", id, unacked, unabsorbed, err)
		}
	}
	if st.dd != nil {
		st.dd.drop() // its producers no longer count against the star's bound
	}
	l.mu.Unlock()
	return nil
}

func (s *Star) stream(id format.StreamID) (*stream, error) {
	s.mu.RLock()
	st := s.streams[id]
	started := s.started
	s.mu.RUnlock()
	if !started {
		return nil, ErrNotStarted
	}
	if st == nil {
		return nil, s.unknown(id)
	}
	return st, nil
}

// AppendOptions qualify one append.
type AppendOptions struct {
	// MatchSeq, if set, must equal the stream's tail (next seq) at
	// sequencing, or the batch is rejected with *SeqMismatchError carrying
	// the acknowledged tail, once the batches sequenced before it resolve.
	MatchSeq *uint64
	// Producer and BatchSeq make the append idempotent (exactly once): a
	// retry of a batch the stream remembers gets the original ack instead
	// of being written again. The zero Producer means none. See dedupe.go.
	Producer format.ProducerID
	BatchSeq uint64
	// Tenant names whose share of the pool budget and of the flights the
	// batch uses (the API server passes its token's hash); see fair.go.
	// "" is a tenant like any other.
	Tenant string
	// FenceToken must be the stream's current fencing token ("" for a
	// stream that is not fenced), or the batch is refused with ErrFenced.
	// The check is sequenced with the appends (see Fence).
	FenceToken string
}

// Pending is an admitted batch waiting for its ack.
type Pending struct {
	b     *batch
	inner batch // the batch itself: one allocation for both
}

// Wait blocks until the batch is acknowledged (or the context ends: the
// batch may still commit).
func (p *Pending) Wait(ctx context.Context) (Ack, error) {
	select {
	case <-p.b.done:
		return p.b.ack, p.b.err
	case <-ctx.Done():
		return Ack{}, ctx.Err()
	}
}

// Done is closed when the batch is acknowledged or failed.
func (p *Pending) Done() <-chan struct{} { return p.b.done }

// Result is the ack or error, valid after Done is closed.
func (p *Pending) Result() (Ack, error) { return p.b.ack, p.b.err }

// Submit admits a batch: validates it, waits for pool budget (honouring
// ctx), sequences it, and queues it for the flusher. It returns once the
// batch is admitted; the ack comes through Pending. Acks of one stream's
// batches release in admission order.
func (s *Star) Submit(ctx context.Context, id format.StreamID, recs []format.Record, opt AppendOptions) (*Pending, error) {
	st, err := s.stream(id)
	if err != nil {
		return nil, err
	}
	size, err := format.ValidateBatch(recs)
	if err != nil {
		return nil, err
	}
	p := &Pending{}
	p.b = &p.inner
	b := p.b
	b.init(st, recs, size)
	b.producer, b.batchSeq, b.tenant, b.fenceToken = opt.Producer, opt.BatchSeq, opt.Tenant, opt.FenceToken
	dup, err := st.l.admit(ctx, b, opt.MatchSeq)
	if err != nil {
		return nil, err
	}
	if dup != nil {
		// A retry of a committed batch: answered, not written again.
		b.ack = *dup
		close(b.done)
	}
	return p, nil
}

// Append admits a batch and waits for its ack.
func (s *Star) Append(ctx context.Context, id format.StreamID, recs []format.Record, opt AppendOptions) (Ack, error) {
	p, err := s.Submit(ctx, id, recs, opt)
	if err != nil {
		return Ack{}, err
	}
	return p.Wait(ctx)
}

// Tail returns a stream's acknowledged tail: the next seq, and the last
// acknowledged record's timestamp.
func (s *Star) Tail(id format.StreamID) (next uint64, lastTsMs int64, err error) {
	s.mu.RLock()
	st := s.streams[id]
	s.mu.RUnlock()
	if st == nil {
		return 0, 0, s.unknown(id)
	}
	v := st.current()
	return v.next, v.ts, nil
}

// Start proves every bucket enforces put-if-absent, takes the leadership of
// each loglet (minting an epoch, taking over from a predecessor when there
// is one), and starts the flushers. It returns once the star can serve.
func (s *Star) Start(ctx context.Context) error {
	for cl, l := range s.loglets {
		// A bucket that proves it does not enforce put-if-absent stops the
		// star. One that cannot be probed now (down, ambiguous) is tolerated
		// while W others prove it: a takeover must not wait for a zone.
		proven := 0
		var unproven []error
		for i, b := range l.cfg.Buckets {
			err := ProveConditionalWrites(ctx, b, s.cfg.StarID, s.rand)
			switch {
			case err == nil:
				proven++
			case errors.Is(err, ErrNoConditionalWrites) || ctx.Err() != nil:
				return fmt.Errorf("star: %s bucket %d (%s): %w", cl, i, b.Name(), err)
			default:
				unproven = append(unproven, fmt.Errorf("%s bucket %d (%s): %w", cl, i, b.Name(), err))
				s.log.Warn("conditional-write probe could not run on a bucket; starting on the others", "class", cl.String(), "bucket", b.Name(), "err", err.Error())
			}
		}
		if proven < l.cfg.W {
			return fmt.Errorf("star: %s: only %d of %d buckets answered the conditional-write probe, W=%d: %w", cl, proven, len(l.cfg.Buckets), l.cfg.W, errors.Join(unproven...))
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for _, l := range s.loglets {
		if err := l.lead(ctx); err != nil {
			cancel()
			return err
		}
	}
	for _, l := range s.loglets {
		l.mu.Lock()
		l.runCtx = runCtx
		l.mu.Unlock()
		s.wg.Add(2)
		go func() { defer s.wg.Done(); l.flusher(runCtx) }()
		go func() { defer s.wg.Done(); l.notifier(runCtx) }()
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	s.log.Info("star started", "star", s.cfg.StarID)
	return nil
}

// Close stops the flushers and any in-process recovery, and waits for them:
// a recovery racing Close stops before it acks or republishes anything.
// Admitted batches that are not yet acked fail: those still in the pool
// with ErrClosed (never written), those in a flight with ErrClosed and
// ErrOutcomeUnknown (the flight may be committed). Nothing acked is
// affected.
func (s *Star) Close() {
	s.mu.Lock()
	s.started = false
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	for _, l := range s.loglets {
		l.close()
	}
	s.wg.Wait()
}

// Stop is an orderly Close: it refuses new appends (ErrClosed: nothing
// written), waits until every admitted batch is acknowledged or has failed,
// or ctx ends, and then closes. Batches still pending then fail as Close
// says (in a flight: ErrOutcomeUnknown), so a bounded Stop on shutdown
// turns most of those outcomes into acks.
func (s *Star) Stop(ctx context.Context) {
	for _, cl := range []metastore.Class{metastore.Standard, metastore.Express} {
		if l := s.loglets[cl]; l != nil {
			l.quiesce(ctx)
		}
	}
	s.Close()
}

// AbsorbHealth is the absorb's report used to diagnose backlog stalls.
type AbsorbHealth struct {
	// MetastoreSlow: the absorb's recent metastore calls were throttled,
	// failed or slow.
	MetastoreSlow bool
}

// SetAbsorbHealth installs the function the star asks when its backlog is
// full, to name the stall's cause. Call before Start.
func (s *Star) SetAbsorbHealth(f func(metastore.ChainID) AbsorbHealth) { s.absorbHealth = f }

// Loglet state for observers (absorb, reads, metrics).

// Chains lists the star's loglets.
func (s *Star) Chains() []metastore.ChainID {
	var out []metastore.ChainID
	for cl := range s.loglets {
		out = append(out, metastore.ChainID{Star: s.cfg.StarID, Class: cl})
	}
	return out
}

// Absorbed tells the star that the chain's checkpoint reached cur: flights
// below it leave the flight index and free their backlog tokens.
func (s *Star) Absorbed(chain metastore.ChainID, cur metastore.Cursor) {
	if l := s.loglets[chain.Class]; l != nil && chain.Star == s.cfg.StarID {
		l.absorbed(cur)
	}
}

// Released returns the chain's released head: the epoch and the first slot
// not yet released.
func (s *Star) Released(chain metastore.ChainID) metastore.Cursor {
	if l := s.loglets[chain.Class]; l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return metastore.Cursor{Epoch: l.epoch, Slot: l.ord.base}
	}
	return metastore.Cursor{}
}

// ChainHealth is one loglet's state, for /healthz.
type ChainHealth struct {
	Chain metastore.ChainID
	Epoch uint64
	// Deposed: a successor leads the chain; this star serves nothing more
	// on it and should be replaced.
	Deposed error
	// Halted: the epoch is halted with this reason, for HaltedFor; the
	// star recovers in-process. Stuck: for longer than HaltWait, so appends
	// fail.
	Halted    error
	HaltedFor time.Duration
	Stuck     bool
}

// Health is the star's state, for /healthz.
type Health struct {
	Started bool
	Chains  []ChainHealth
}

// OK reports whether the star serves: started, leading every chain, and no
// epoch halted for longer than HaltWait. A star that is not OK should be
// replaced (ECS does so on a failing health check): a deposed star never
// serves again, and a successor takes over a stuck one.
func (h Health) OK() bool {
	if !h.Started {
		return false
	}
	for _, c := range h.Chains {
		if c.Deposed != nil || c.Stuck {
			return false
		}
	}
	return true
}

// String is one line per chain (or "not started").
func (h Health) String() string {
	if !h.Started {
		return "not started\n"
	}
	var b strings.Builder
	for _, c := range h.Chains {
		fmt.Fprintf(&b, "%s epoch %d: ", c.Chain, c.Epoch)
		switch {
		case c.Deposed != nil:
			fmt.Fprintf(&b, "not leading: %v\n", c.Deposed)
		case c.Stuck:
			fmt.Fprintf(&b, "halted for %s, past --halt-wait (appends fail until recovery): %v\n", c.HaltedFor.Round(time.Millisecond), c.Halted)
		case c.Halted != nil:
			fmt.Fprintf(&b, "halted for %s, recovering: %v\n", c.HaltedFor.Round(time.Millisecond), c.Halted)
		default:
			b.WriteString("leading\n")
		}
	}
	return b.String()
}

// Health reports the star's state: started, and per chain whether it
// leads, is halted (and for how long, and why) or was deposed.
func (s *Star) Health() Health {
	h := Health{Started: s.Started()}
	for _, cl := range []metastore.Class{metastore.Standard, metastore.Express} {
		l := s.loglets[cl]
		if l == nil {
			continue
		}
		l.mu.Lock()
		c := ChainHealth{Chain: l.chain, Epoch: l.epoch, Deposed: l.deposed, Halted: l.halted, Stuck: l.haltExpired}
		if l.halted != nil {
			c.HaltedFor = s.clk.Now().Sub(l.haltedAt)
		}
		l.mu.Unlock()
		h.Chains = append(h.Chains, c)
	}
	return h
}
