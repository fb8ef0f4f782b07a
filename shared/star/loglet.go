package star

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"sync"
	"sync/atomic"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metrics"
)

// batch is one admitted append.
type batch struct {
	st      *stream
	recs    int
	size    int    // encoded bytes
	enc     []byte // encoded records
	first   uint64
	firstTs int64
	lastTs  int64
	at      time.Time               // admission time
	fl      *flight                 // the flight that carries it (set at release)
	dec     atomic.Pointer[decoded] // its records, decoded for readers (index.go)
	// producer and batchSeq: an idempotent producer's batch (zero producer:
	// none); see dedupe.go.
	producer format.ProducerID
	batchSeq uint64
	// tenant is AppendOptions.Tenant: whose share of the pool it uses.
	tenant string
	// fenceToken is the token the append carries; cmd is set for a command
	// record (commands.go); cmds is the stream's command state after the
	// batch, for the flight's command table (hasCmds: the stream has any).
	fenceToken string
	cmd        *command
	cmds       format.StreamCommands
	hasCmds    bool

	ack  Ack
	err  error
	done chan struct{}
	// abandoned: the producer was told the outcome is unknown (a halt
	// outlived HaltWait); a later release or failure tells it nothing more.
	abandoned bool
}

// newBatch is an encoded batch whose 0 timestamps are nowMs (as stamp
// would give them under client-prefer).
func newBatch(st *stream, recs []format.Record, size int, nowMs int64) *batch {
	b := &batch{}
	b.init(st, recs, size)
	_ = b.stamp(format.StreamConfig{Uncapped: true}, nowMs)
	return b
}

// init fills b with recs, encoded. Their timestamps are given at
// sequencing (stamp), by the stream's timestamping mode then in force.
func (b *batch) init(st *stream, recs []format.Record, size int) {
	*b = batch{st: st, recs: len(recs), size: size, enc: make([]byte, 0, size), done: make(chan struct{})}
	for _, r := range recs {
		b.enc = format.AppendRecord(b.enc, r)
	}
}

// clampTimestamps makes the batch's timestamps non-decreasing from floor
// (the stream's last timestamp), rewriting the encoded records in place, and
// returns the last timestamp.
func (b *batch) clampTimestamps(floor int64) int64 {
	for off := 0; off < len(b.enc); {
		n := int(binary.BigEndian.Uint32(b.enc[off:]))
		ts := format.RecordTimestamp(b.enc[off:])
		if ts < floor {
			binary.BigEndian.PutUint64(b.enc[off+4:], uint64(floor))
			ts = floor
		}
		if off == 0 {
			b.firstTs = ts
		}
		floor = ts
		off += 4 + n
	}
	b.lastTs = floor
	return floor
}

// acked returns the batch's ack if it has been acknowledged. Called with
// the loglet's mu.
func (b *batch) acked() (Ack, bool) {
	select {
	case <-b.done:
		return b.ack, b.err == nil
	default:
		return Ack{}, false
	}
}

// finish delivers the batch's outcome, once. Called with the loglet's mu.
func (b *batch) finish(a Ack, err error) {
	if b.abandoned {
		return
	}
	b.ack, b.err = a, err
	close(b.done)
}

// flight is what the flusher cut: one slot, one transit bundle.
type flight struct {
	epoch   uint64
	slot    uint64
	batches []*batch
	bytes   int
	builder *format.Builder
	obj     []byte
	objLen  int // len(obj), kept once obj is recycled (backlog bytes)
	cutAt   time.Time
	// carried are the streams' dedupe tables the flight carries (ADR
	// 0062; nil for most flights).
	carried []carriedTable
	durable bool
	relAt   time.Time
	// The builder (and obj) go back to the free list as soon as every
	// copy's upload has finished: nothing reads the rendered object after
	// that (the flight index serves reads from each batch's own records),
	// so a released flight waiting for the absorb holds its batches only,
	// not a second copy of their bytes.
	uploaded bool
}

// setObj sets the flight's rendered object. Called before its commit
// starts, so the commit and release see objLen.
func (f *flight) setObj(obj []byte) { f.obj, f.objLen = obj, len(obj) }

// loglet is one class's chain on this star: pool, flusher, commit, release.
type loglet struct {
	s     *Star
	class metastore.Class
	cfg   ClassConfig
	chain metastore.ChainID

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on a state change someone waits for
	watched bool          // someone holds changed (see watch)
	epoch   uint64
	nonce   format.Nonce
	// pool: admitted, uncut batches, per tenant (fair.go)
	pool   *pool
	budget int
	// pipeline
	ord      *order
	inflight map[uint64]*flight
	// flight index: released, unabsorbed flights in slot order
	released []*flight
	relBytes int
	halted   error
	haltedAt time.Time
	haltSeq  uint64 // counts halts, so a halt's timer knows its own
	// haltExpired: the current halt outlived HaltWait: pending batches were
	// told so, and admission refuses until recovery.
	haltExpired bool
	closed      bool
	stopping    bool   // Stop: admission refuses, pending batches finish
	stall       string // current stall cause, "" when not stalled
	builders    []*format.Builder
	relSignal   chan struct{} // wakes the notifier
	deposed     error         // set when a successor exists: nothing more is served
	cutTried    uint64        // the epoch whose cut this loglet last tried to record
	// cuts counts flights cut (a stream's cutMark names the last it rode);
	// carryGen is the carried tables' generation: a stream whose
	// carriedGen differs carries its table in its next flight (carry.go).
	cuts, carryGen uint64
	// cutNowMs and cutCarried: the cut under way's time and the carried
	// tables it has taken so far (carry.go, admitted).
	cutNowMs   int64
	cutCarried []carriedTable
	runCtx     context.Context

	m logletMetrics
}

type logletMetrics struct {
	appends, records, bytes, flights *metrics.Counter
	ackLatency, putLatency           *metrics.Histogram
	stalls                           map[string]*metrics.Counter
	halts                            *metrics.Counter
	bucketPut                        []*metrics.Histogram
}

// Stall causes, as exported in strand_backlog_stalls_total{cause=...}.
const (
	StallAbsorbLagging = "absorb_lagging"
	StallMetastoreSlow = "metastore_slow"
	StallEpochSettling = "epoch_settling"
)

func newLoglet(s *Star, cl metastore.Class, cfg ClassConfig) *loglet {
	l := &loglet{
		s: s, class: cl, cfg: cfg,
		chain:     metastore.ChainID{Star: s.cfg.StarID, Class: cl},
		changed:   make(chan struct{}),
		budget:    cfg.MemoryBufferMiB << 20,
		pool:      newPool(s.cfg.TenantFIFO),
		inflight:  map[uint64]*flight{},
		relSignal: make(chan struct{}, 1),
		carryGen:  1, // a stream's carriedGen starts at 0: it carries in its first flight
	}
	r, c := s.reg, cl.String()
	l.m = logletMetrics{
		appends:    r.Counter("strand_appends_total", "Batches acknowledged.", "class", c),
		records:    r.Counter("strand_records_total", "Records acknowledged.", "class", c),
		bytes:      r.Counter("strand_bytes_total", "Encoded record bytes acknowledged.", "class", c),
		flights:    r.Counter("strand_flights_total", "Flights released.", "class", c),
		ackLatency: r.Histogram("strand_ack_seconds", "Admission to ack latency.", metrics.LatencyBuckets, "class", c),
		putLatency: r.Histogram("strand_commit_seconds", "Cut to W confirms.", metrics.LatencyBuckets, "class", c),
		halts:      r.Counter("strand_epoch_halts_total", "Epoch halts.", "class", c),
		stalls:     map[string]*metrics.Counter{},
	}
	for _, cause := range []string{StallAbsorbLagging, StallMetastoreSlow, StallEpochSettling} {
		l.m.stalls[cause] = r.Counter("strand_backlog_stalls_total", "Publishes blocked at the backlog budget, by diagnosed cause.", "class", c, "cause", cause)
	}
	for i, b := range cfg.Buckets {
		l.m.bucketPut = append(l.m.bucketPut, r.Histogram("strand_put_seconds", "Slot PUT latency per bucket.", metrics.LatencyBuckets, "class", c, "bucket", itoa(i)+":"+b.Name()))
	}
	r.GaugeFunc("strand_pool_bytes", "Admitted, uncut bytes.", func() float64 { l.mu.Lock(); defer l.mu.Unlock(); return float64(l.pool.bytes) }, "class", c)
	r.GaugeFunc("strand_pool_tenants", "Tenants (tokens) with pooled bytes or a batch waiting for room.", func() float64 { l.mu.Lock(); defer l.mu.Unlock(); return float64(len(l.pool.tenants)) }, "class", c)
	r.GaugeFunc("strand_pool_waiting_tenants", "Tenants with a batch waiting for room in the pool (or for their share of it).", func() float64 { l.mu.Lock(); defer l.mu.Unlock(); return float64(l.pool.waiters) }, "class", c)
	r.GaugeFunc("strand_window_slots", "Slots assigned and unreleased.", func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.ord == nil {
			return 0
		}
		return float64(l.ord.pending())
	}, "class", c)
	r.GaugeFunc("strand_epoch_halted_seconds", "How long the current epoch has been halted (0: not halted).", func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.halted == nil {
			return 0
		}
		return s.clk.Now().Sub(l.haltedAt).Seconds()
	}, "class", c)
	r.GaugeFunc("strand_backlog_flights", "Released, unabsorbed flights.", func() float64 { l.mu.Lock(); defer l.mu.Unlock(); return float64(len(l.released)) }, "class", c)
	r.GaugeFunc("strand_backlog_age_seconds", "Age of the oldest released, unabsorbed flight.", func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.released) == 0 {
			return 0
		}
		return s.clk.Now().Sub(l.released[0].relAt).Seconds()
	}, "class", c)
	return l
}

// watch returns the channel the next broadcast closes. Called with l.mu held.
func (l *loglet) watch() <-chan struct{} {
	l.watched = true
	return l.changed
}

func (l *loglet) broadcast() {
	if !l.watched {
		return // nobody holds the channel: nothing to wake, nothing to allocate
	}
	close(l.changed)
	l.changed = make(chan struct{})
	l.watched = false
}

// wait releases l.mu until the state changes, the timer fires, or ctx ends.
// Called with l.mu held; returns with it held.
func (l *loglet) wait(ctx context.Context, timer <-chan time.Time) error {
	ch := l.watch()
	l.mu.Unlock()
	defer l.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-timer:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// admit sequences b and queues it, blocking while the pool is at its budget.
//
// A match_seq_num miss is answered with the stream's acknowledged (durable)
// tail. While batches of the stream that were sequenced before the miss are
// still unacknowledged, the answer is held until they resolve: the assigned
// tail would tell a producer retrying a timed-out batch that it was written
// when it was only sequenced (and is lost if the star then closes or halts).
// If they fail instead, the retry gets that failure (closed, not leader,
// halted), never a tail covering them.
//
// A producer batch (b.producer set) is first checked against the stream's
// dedupe table: a retry of a remembered batch is not admitted again; admit
// returns the original's ack once it is committed (waiting while it is in
// flight). A gap or a batch below the window is refused.
func (l *loglet) admit(ctx context.Context, b *batch, match *uint64) (*Ack, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := b.st
	held, target := false, uint64(0)
	waiting := false // counted as waiting for room (pool.wait)
	nowMs := l.s.clk.Now().UnixMilli()
	for {
		if l.closed || l.stopping {
			return nil, ErrClosed
		}
		if l.deposed != nil {
			return nil, l.deposed
		}
		if st.drained {
			if to, ok := MoveTarget(st.cmds.FenceToken); ok {
				return nil, &MovedError{Stream: st.id, To: to}
			}
			return nil, fmt.Errorf("%w: %s is being deleted", ErrUnknownStream, st.id)
		}
		if l.haltExpired {
			return nil, fmt.Errorf("%w: epoch %d halted for more than %s, nothing written: %v", ErrHalted, l.epoch, l.s.cfg.HaltWait, l.halted)
		}
		if !b.producer.IsZero() {
			v := st.dedupe(l.s).check(b.producer, b.batchSeq, nowMs)
			if v.err != nil {
				return nil, fmt.Errorf("stream %s: %w", st.id, v.err)
			}
			if v.dup != nil {
				if v.dup.b == nil {
					a := v.dup.ack
					a.Tail, a.LastTsMs = max(a.Tail, st.ackedNext), max(a.LastTsMs, st.ackedTs)
					return &a, nil
				}
				orig := v.dup.b
				if err := l.wait(ctx, nil); err != nil {
					return nil, fmt.Errorf("star: retry of producer %x batch seq %d waiting for the original's outcome: %w", b.producer[:], b.batchSeq, err)
				}
				// Acknowledged: answer with its ack, even if the table
				// has forgotten the producer since (a star-wide bound
				// may, as soon as its batches are released).
				if a, ok := orig.acked(); ok {
					a.Tail, a.LastTsMs = max(a.Tail, st.ackedNext), max(a.LastTsMs, st.ackedTs)
					return &a, nil
				}
				continue
			}
		}
		if err := st.checkFence(b); err != nil {
			return nil, err
		}
		if match != nil && *match != st.next {
			if !held {
				held, target = true, st.next
			}
			if st.ackedNext >= target {
				return nil, &SeqMismatchError{Expected: *match, Tail: st.ackedNext}
			}
			if err := l.wait(ctx, nil); err != nil {
				return nil, fmt.Errorf("star: match_seq_num %d missed; waiting for the stream's batches below seq %d to be acknowledged (acknowledged tail %d): %w",
					*match, target, st.ackedNext, err)
			}
			continue
		}
		if l.pool.fits(b.tenant, b.size, l.budget) {
			break
		}
		if !waiting {
			waiting = true
			l.pool.wait(b.tenant)
			defer l.unwait(b.tenant)
		}
		if err := l.wait(ctx, nil); err != nil {
			return nil, fmt.Errorf("star: admission waiting for pool budget (%d MiB, shared fairly among %d tenants): %w", l.budget>>20, len(l.pool.tenants), err)
		}
	}
	// Stamp, sequence and apply in one critical section: the batch is
	// judged by the configuration in force at its seqs.
	if err := b.stamp(st.cfg, l.s.clk.Now().UnixMilli()); err != nil {
		return nil, err
	}
	b.first = st.next
	st.next += uint64(b.recs)
	if !b.producer.IsZero() {
		st.dd.admit(b.producer, b.batchSeq, b, nowMs)
	}
	st.apply(b)
	st.lastTs = b.clampTimestamps(st.lastTs)
	b.at = l.s.clk.Now()
	l.pool.push(b)
	if l.pool.n == 1 || l.pool.bytes >= l.cfg.FlightKiB<<10 {
		l.broadcast()
	}
	return nil, nil
}

// unwait ends a batch's wait for room; the tenants over their share that
// it held back may now enter. Called with l.mu held.
func (l *loglet) unwait(tenant string) {
	l.pool.unwait(tenant)
	l.broadcast()
}

// backlogFull reports whether claiming another slot would exceed the
// backlog budget: released-unabsorbed plus in-flight flights.
func (l *loglet) backlogFull() bool {
	if len(l.released)+l.ord.pending() >= l.s.cfg.BacklogFlights {
		return true
	}
	if mib := l.s.cfg.BacklogMiB; mib > 0 {
		bytes := l.relBytes
		for _, f := range l.inflight {
			bytes += f.bytes
		}
		return bytes >= mib<<20
	}
	return false
}

// flusher is the loglet's one cutting loop: it cuts the pool into flights and
// claims each flight's slot inline, so cut order is slot order.
func (l *loglet) flusher(ctx context.Context) {
	target := l.cfg.FlightKiB << 10
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		// 1. Wait for something worth cutting.
		for {
			if l.closed || l.deposed != nil || ctx.Err() != nil {
				return
			}
			if l.halted != nil {
				if l.wait(ctx, nil) != nil {
					return
				}
				continue
			}
			if o := l.pool.oldest(); o != nil {
				age := l.s.clk.Now().Sub(o.at)
				idle := l.cfg.IdleCut && l.ord.pending() == 0
				if idle || l.pool.bytes >= target || age >= l.cfg.FlushDeadline || l.pool.bytes+o.size > l.budget || l.pool.waiters > 0 {
					break
				}
				if l.wait(ctx, l.s.clk.After(l.cfg.FlushDeadline-age)) != nil {
					return
				}
				continue
			}
			if l.wait(ctx, nil) != nil {
				return
			}
		}
		// 2. Wait for a slot: the pipeline window and the backlog budget.
		stalled := false
		for l.halted == nil && !l.closed && (l.ord.full() || l.backlogFull()) {
			if l.backlogFull() && !l.ord.full() && !stalled {
				stalled = true
				l.stall = l.diagnose()
				l.m.stalls[l.stall].Inc()
				l.s.log.Warn("backlog budget reached: publishes blocked", "chain", l.chain.String(), "cause", l.stall,
					"backlog_flights", len(l.released), "in_flight", l.ord.pending(), "budget", l.s.cfg.BacklogFlights)
			}
			if l.wait(ctx, nil) != nil {
				return
			}
		}
		if stalled {
			l.s.log.Info("backlog stall cleared", "chain", l.chain.String(), "cause", l.stall)
			l.stall = ""
		}
		if l.halted != nil || l.closed || l.pool.n == 0 {
			continue
		}
		// 3. Cut and claim, inline.
		f := &flight{cutAt: l.s.clk.Now(), epoch: l.epoch}
		l.beginCut(f.cutAt.UnixMilli())
		f.batches, f.bytes = l.pool.cut(target, l)
		f.carried, l.cutCarried = l.cutCarried, nil
		f.slot = l.ord.claim()
		l.inflight[f.slot] = f
		nonce := l.nonce
		f.builder = l.takeBuilder()
		l.broadcast() // pool space freed
		// 4. Render once, outside the lock; commit in the background.
		l.mu.Unlock()
		f.setObj(render(f.builder, f.epoch, f.slot, nonce, f.batches, f.carried))
		l.trace(TraceCut, f, f.cutAt)
		go l.commit(ctx, f)
		l.mu.Lock()
	}
}

// diagnose names why the backlog is full. Called with l.mu held.
//
//   - metastore_slow: the absorb reports its metastore calls throttled,
//     failing or slow;
//   - epoch_settling: the oldest unabsorbed flight belongs to an earlier
//     epoch than the one being written (after a halt's recovery or a
//     takeover): the absorb must finish that epoch up to its recorded cut
//     and step to the next before the backlog drains. (While the epoch is
//     halted nothing is cut at all: that is a halt, reported as such, not
//     a stall.)
//   - absorb_lagging: otherwise; the absorb is behind or not running.
func (l *loglet) diagnose() string {
	if l.s.absorbHealth != nil {
		if h := l.s.absorbHealth(l.chain); h.MetastoreSlow {
			return StallMetastoreSlow
		}
	}
	if l.halted != nil || (len(l.released) > 0 && l.released[0].epoch < l.epoch) {
		return StallEpochSettling
	}
	return StallAbsorbLagging
}

// uploaded records that every copy's upload of f has finished.
func (l *loglet) uploaded(f *flight) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.uploaded = true
	l.recycle(f)
}

// recycle returns f's builder to the free list once nothing reads its
// bytes: every copy's upload has finished. Called with l.mu held.
func (l *loglet) recycle(f *flight) {
	if f.uploaded && f.builder != nil {
		l.builders = append(l.builders, f.builder)
		f.builder, f.obj = nil, nil
	}
}

func (l *loglet) takeBuilder() *format.Builder {
	if n := len(l.builders); n > 0 {
		b := l.builders[n-1]
		l.builders = l.builders[:n-1]
		return b
	}
	return format.NewBuilder()
}

// render groups a flight's batches into one segment per stream, in order of
// each stream's first arrival, each stream's batches in arrival (= seq)
// order, with the streams' carried tables.
func render(b *format.Builder, epoch, slot uint64, nonce format.Nonce, batches []*batch, carried []carriedTable) []byte {
	b.Reset(epoch, slot, nonce)
	done := make(map[*stream]bool, 8)
	for i, first := range batches {
		if done[first.st] {
			continue
		}
		done[first.st] = true
		b.BeginSegment(first.st.id, first.first)
		for _, bt := range batches[i:] {
			if bt.st == first.st {
				b.AddRecords(bt.enc, bt.recs, bt.firstTs, bt.lastTs)
				if !bt.producer.IsZero() {
					b.AddBatch(bt.producer, bt.batchSeq, bt.first, bt.recs)
				}
				if bt.hasCmds {
					b.SetCommands(bt.cmds) // the latest batch's state wins
				}
			}
		}
		for _, c := range carried {
			if c.st == first.st {
				b.SetCarried(c.below, c.marks)
			}
		}
		b.EndSegment()
	}
	return b.Finish()
}

// markDurable records that f reached W copies and releases, in slot order,
// every flight that can now release.
func (l *loglet) markDurable(f *flight) {
	l.mu.Lock()
	if l.halted != nil || l.closed || f.durable || f.epoch != l.epoch || l.inflight[f.slot] != f {
		// A halted epoch releases nothing more here; recovery acks what the
		// fence finds committed.
		f.durable = true
		l.mu.Unlock()
		return
	}
	f.durable = true
	from, to := l.ord.markDurable(f.slot)
	now := l.s.clk.Now()
	for s := from; s < to; s++ {
		rf := l.inflight[s]
		delete(l.inflight, s)
		l.release(rf, now)
	}
	if to > from {
		l.broadcast()
	}
	l.mu.Unlock()
	if to > from {
		l.notify()
	}
}

// release acks a flight's batches and moves it into the flight index.
// Called with l.mu held, in slot order.
func (l *loglet) release(f *flight, now time.Time) {
	f.relAt = now
	l.trace(TraceRelease, f, now)
	// Index and publish before acking: a producer that reads after its ack
	// sees its records.
	for _, b := range f.batches {
		st := b.st
		st.vmu.Lock()
		st.ackedNext = b.first + uint64(b.recs)
		st.ackedTs = b.lastTs
		b.fl = f
		st.indexed = append(st.indexed, b)
		st.gen++
		st.vmu.Unlock()
		if b.hasCmds {
			st.ackedCmds = b.cmds
		}
		st.moving = true
	}
	// One view change per stream per flight, and none built unless a
	// reader waits (moved): a release nobody watches allocates nothing.
	for _, b := range f.batches {
		if st := b.st; st.moving {
			st.moving = false
			st.moved(true)
		}
	}
	for _, b := range f.batches {
		a := Ack{FirstSeq: b.first, LastSeq: b.first + uint64(b.recs) - 1, Tail: b.st.ackedNext, LastTsMs: b.st.ackedTs,
			FirstTsMs: b.firstTs, EndTsMs: b.lastTs}
		if !b.producer.IsZero() {
			b.st.dd.released(b, a)
		}
		b.finish(a, nil)
		l.m.appends.Inc()
		l.m.records.Add(uint64(b.recs))
		l.m.bytes.Add(uint64(b.size))
		l.m.ackLatency.Observe(now.Sub(b.at).Seconds())
	}
	l.m.flights.Inc()
	l.released = append(l.released, f)
	l.relBytes += f.objLen
}

// absorbed drops flights below the checkpoint from the flight index.
func (l *loglet) absorbed(cur metastore.Cursor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for n < len(l.released) {
		f := l.released[n]
		if !(metastore.Cursor{Epoch: f.epoch, Slot: f.slot}).Less(cur) {
			break
		}
		l.relBytes -= f.objLen
		for _, b := range f.batches {
			st := b.st
			if len(st.indexed) > 0 && st.indexed[0] == b {
				// Resliced, not cleared: views alias the array. The
				// dropped prefix is garbage at the append that outgrows
				// the array (or now, when the index empties).
				st.vmu.Lock()
				st.indexed = st.indexed[1:]
				if len(st.indexed) == 0 {
					st.indexed = nil
				}
				st.gen++
				st.vmu.Unlock()
				st.moved(false)
			}
		}
		n++
	}
	if n > 0 {
		clear(l.released[:n])
		l.released = l.released[n:]
		l.broadcast()
	}
}

// notifier publishes coalesced release events to the waker: at most one
// per ReleaseEventInterval, carrying the latest released head, so the
// absorb's metastore bill stays flat however fast flights release.
func (l *loglet) notifier(ctx context.Context) {
	var last metastore.Cursor
	var retry <-chan time.Time // set while the latest head is undelivered
	backoff := l.s.cfg.ReleaseEventInterval
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.relSignal:
		case <-retry:
		}
		retry = nil
		l.mu.Lock()
		head := metastore.Cursor{Epoch: l.epoch, Slot: l.ord.base}
		l.mu.Unlock()
		if head != last && l.s.waker != nil {
			if err := l.s.waker.Released(ctx, l.chain, head); err != nil {
				if ctx.Err() != nil {
					return
				}
				backoff = min(max(2*backoff, 50*time.Millisecond), 5*time.Second)
				l.s.log.Warn("release event not delivered; retrying with the latest head", "chain", l.chain.String(), "head", head.String(), "in", backoff.String(), "err", err.Error())
				retry = l.s.clk.After(backoff)
				continue
			}
			last = head
			backoff = l.s.cfg.ReleaseEventInterval
		}
		if iv := l.s.cfg.ReleaseEventInterval; iv > 0 {
			select {
			case <-ctx.Done():
				return
			case <-l.s.clk.After(iv):
			}
		}
	}
}

// halt stops the epoch: nothing at or past the first unreleased slot will
// release in it.
func (l *loglet) halt(epoch uint64, why error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.halted != nil || epoch != l.epoch {
		return
	}
	l.halted = why
	l.haltedAt = l.s.clk.Now()
	l.haltSeq++
	l.m.halts.Inc()
	l.s.log.Error("epoch halted: acks stop until recovery", "chain", l.chain.String(), "epoch", epoch, "reason", why.Error())
	l.broadcast()
	if l.s.onHalt != nil {
		go l.s.onHalt(l.chain, epoch, why)
	}
	if l.runCtx != nil && !l.closed {
		seq := l.haltSeq
		l.s.wg.Add(1)
		go func() { defer l.s.wg.Done(); l.haltTimer(l.runCtx, seq) }()
	}
	if l.s.fencer != nil && l.runCtx != nil && !l.closed {
		// Close waits for the recovery (s.wg): once closed, it stops. The
		// Add happens under l.mu before close sets l.closed, so before
		// Close's Wait.
		l.s.wg.Add(1)
		go func() { defer l.s.wg.Done(); l.recoverFrom(l.runCtx, epoch) }()
	}
}

// haltTimer bounds the producers' wait on halt number seq: if it is still
// the current halt after HaltWait, every pending batch fails with
// ErrOutcomeUnknown and ErrHalted and the halt's reason (recovery may still
// commit it: it is republished with its seqs, and its stream's tail moves
// past it), and admission refuses until recovery.
func (l *loglet) haltTimer(ctx context.Context, seq uint64) {
	select {
	case <-ctx.Done():
		return
	case <-l.s.clk.After(l.s.cfg.HaltWait):
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.halted == nil || l.haltSeq != seq {
		return
	}
	l.haltExpired = true
	err := fmt.Errorf("%w: %w: epoch %d halted for %s: %v", ErrOutcomeUnknown, ErrHalted, l.epoch, l.s.cfg.HaltWait, l.halted)
	n := 0
	abandon := func(b *batch) {
		if !b.abandoned {
			b.finish(Ack{}, err)
			b.abandoned = true
			n++
		}
	}
	for _, f := range l.inflight {
		for _, b := range f.batches {
			abandon(b)
		}
	}
	l.pool.each(abandon)
	l.s.log.Error("epoch halted longer than --halt-wait: pending appends fail (outcome unknown), new appends are refused until recovery",
		"chain", l.chain.String(), "epoch", l.epoch, "halt_wait", l.s.cfg.HaltWait.String(), "failed_batches", n, "reason", l.halted.Error())
	l.broadcast()
}

// quiesce refuses new appends and waits, until ctx ends, for every admitted
// batch to be acknowledged or to fail (it stops waiting early on a
// successor, or a halt past HaltWait).
func (l *loglet) quiesce(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopping = true
	l.broadcast()
	for (l.pool.n > 0 || len(l.inflight) > 0) && !l.closed && l.deposed == nil && !l.haltExpired {
		if l.wait(ctx, nil) != nil {
			return
		}
	}
}

func (l *loglet) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	l.pool.each(func(b *batch) { b.finish(Ack{}, ErrClosed) })
	l.pool.drop()
	unknown := fmt.Errorf("%w: %w", ErrOutcomeUnknown, ErrClosed)
	for _, f := range l.inflight {
		for _, b := range f.batches {
			select {
			case <-b.done:
			default:
				b.finish(Ack{}, unknown)
			}
		}
	}
	l.broadcast()
}
