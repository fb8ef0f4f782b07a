package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/star"
)

// ReadStats are a read workload's figures.
type ReadStats struct {
	Workload string `json:"workload"`
	Readers  int    `json:"readers_per_stream"`

	// tail: producer's scheduled send to the record delivered to a reader,
	// per record, and its excess over the ack latency of the same run.
	EndToEnd  Percentiles `json:"end_to_end,omitempty"`
	GapP50Ms  float64     `json:"gap_p50_ms,omitempty"`
	GapP99Ms  float64     `json:"gap_p99_ms,omitempty"`
	GapP999Ms float64     `json:"gap_p999_ms,omitempty"`

	// catch-up: readers from seq 0 over the backlog.
	BacklogMB  float64 `json:"backlog_mb,omitempty"`
	SettledPct int     `json:"settled_pct"`
	Seconds    float64 `json:"seconds"`

	Records        int64   `json:"records"` // delivered, all readers
	MBps           float64 `json:"mb_per_s"`
	RecordsPerSec  float64 `json:"records_per_s"`
	ReaderMBpsMin  float64 `json:"reader_mb_per_s_min,omitempty"`
	ReaderMBpsMean float64 `json:"reader_mb_per_s_mean,omitempty"`

	ChainGetsPerGB   float64  `json:"chain_gets_per_gb"`   // per GiB delivered
	SettledGetsPerGB float64  `json:"settled_gets_per_gb"` // per GiB delivered
	GetBytesPerByte  float64  `json:"get_bytes_per_byte"`  // bytes fetched per body byte delivered
	MetaReadsPerGB   float64  `json:"metastore_reads_per_gb"`
	CPUSeconds       float64  `json:"cpu_seconds"` // the whole process over the window
	CPUSecondsPerGB  float64  `json:"cpu_seconds_per_gb"`
	Cost             ReadCost `json:"cost_usd_per_gb"`
}

// readPoint expands the read workloads of base (one record size, class
// and stream count): tail and catch-up at each Readers count; fan-out at
// each FanoutReaders count on one stream.
func (c Config) readPoints(base point) []point {
	var out []point
	add := func(w string, streams int, readers []int) {
		for _, r := range readers {
			p := base
			p.workload, p.readers, p.streams = w, r, streams
			if w == WorkTail {
				p.rate = c.TailRateMBps
			}
			out = append(out, p)
		}
	}
	for _, w := range c.Workloads {
		switch w {
		case WorkTail, WorkCatchup:
			add(w, base.streams, c.Readers)
		case WorkFanout:
			add(WorkTail, 1, c.FanoutReaders)
			add(WorkCatchup, 1, c.FanoutReaders)
		}
	}
	return out
}

// readSide opens read sessions on one run's streams.
type readSide interface {
	// session reads stream from seq 0 (and, unless noTail, follows the
	// tail) into c, until ctx ends or c refuses a record.
	session(ctx context.Context, stream int, noTail bool, c *checker) error
	tail(ctx context.Context, stream int) (uint64, error)
}

// inprocReads reads through a read.Reader on the run's star and stores.
type inprocReads struct {
	rd      *read.Reader
	st      *star.Star
	streams []metastore.Stream
	ids     []format.StreamID
}

func newInprocReads(e *env, st *star.Star, class metastore.Class) *inprocReads {
	r := &inprocReads{st: st, ids: e.ids,
		rd: &read.Reader{Star: st, Meta: e.meta, Settled: e.settled, Sets: map[metastore.Class]chain.Set{class: {Buckets: e.set, W: e.w}}}}
	for i, id := range e.ids {
		r.streams = append(r.streams, metastore.Stream{Name: streamName(i, id), ID: id.String(), Class: class, Star: st.ID(), State: metastore.StreamActive})
	}
	if e.index != nil { // the pass index (Config.PassIndex): runs, passes and packs hold what no ref does yet
		r.rd.Transit = &passindex.Window{Meta: e.meta, Bucket: e.settled, Parallel: passindex.DefaultColdLoadParallel} // as the node's
	}
	return r
}

func (r *inprocReads) session(ctx context.Context, stream int, noTail bool, c *checker) error {
	return r.rd.Session(ctx, r.streams[stream], read.Start{Kind: read.FromSeq}, read.SessionOptions{NoTail: noTail}, func(b read.Batch) error {
		c.arrive()
		defer c.flush()
		for _, x := range b.Records {
			if err := c.record(x.Seq, x.Body); err != nil {
				return err
			}
		}
		return nil
	})
}

func (r *inprocReads) tail(_ context.Context, stream int) (uint64, error) {
	next, _, err := r.st.Tail(r.ids[stream])
	return next, err
}

// apiReads reads through the Go client.
type apiReads struct {
	c     *client.Client
	names []string
}

func (r *apiReads) session(ctx context.Context, stream int, noTail bool, c *checker) error {
	rs, err := r.c.OpenReadSession(ctx, r.names[stream], client.FromSeq(0), client.SessionOptions{NoTail: noTail})
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		c.arrive()
		for _, x := range rs.Batch().Records {
			if err := c.record(x.Seq, x.Body); err != nil {
				c.flush()
				return err
			}
		}
		c.flush()
	}
	return rs.Err()
}

func (r *apiReads) tail(ctx context.Context, stream int) (uint64, error) {
	t, err := r.c.CheckTail(ctx, r.names[stream])
	return t.NextSeq, err
}

// ErrOrder: a reader saw a record out of order, skipped or repeated.
var ErrOrder = errors.New("bench: records out of order")

// checker is one reader's independent record: the next seq it must see
// (every record once, in order, from 0), what it received, and, for a
// tail, each record's end-to-end latency from the stamp in its body.
type checker struct {
	stream   int
	next     atomic.Uint64 // read by the waiter while the reader runs
	bytes    int64
	e2e      *hist
	from, to time.Time // stamps counted: the measured window
	now      func() time.Time
	done     time.Time // when the last record arrived
	// The batch being checked: when it arrived (one clock read per batch,
	// not per record), and the run of equal stamps not yet recorded (a
	// producer's batch shares one stamp).
	arrived  time.Time
	runStamp int64
	runN     int64
}

// arrive starts a delivered batch: its records arrived now.
func (c *checker) arrive() { c.arrived = c.now() }

// record checks one record of the batch and counts its latency.
func (c *checker) record(seq uint64, body []byte) error {
	if want := c.next.Load(); seq != want {
		return fmt.Errorf("%w: stream %d: seq %d where %d was due", ErrOrder, c.stream, seq, want)
	}
	c.next.Add(1)
	c.bytes += int64(len(body))
	if c.e2e != nil && len(body) >= 8 {
		stamp := int64(binary.BigEndian.Uint64(body))
		if stamp != c.runStamp {
			c.flush()
			c.runStamp = stamp
		}
		c.runN++
	}
	return nil
}

// flush records the pending run of equal stamps (if in the window).
func (c *checker) flush() {
	if c.runN == 0 {
		return
	}
	at := time.Unix(0, c.runStamp)
	if !at.Before(c.from) && at.Before(c.to) {
		c.e2e.recordN(c.arrived.Sub(at), c.runN)
	}
	c.runN = 0
}

// recordN adds n equal values.
func (h *hist) recordN(d time.Duration, n int64) {
	h.sum += d * time.Duration(n)
	_ = h.h.RecordValues(min(max(int64(d+h.offset), 1), histMax), n) // clamped: cannot fail
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readRun is one read point's stores and sides.
type readRun struct {
	// flushBytes and flushAge: settleAll's on the pass index (Config).
	flushBytes int64
	flushAge   time.Duration
	e          *env
	tgt        target
	reads      readSide
	stop       func()
}

// startRead starts pt's stores in cfg.Mode (in-process star or whole
// node on loopback), without the janitor: the backlog stays readable.
func startRead(ctx context.Context, cfg Config, pt point) (*readRun, error) {
	e := newEnv(cfg, pt)
	if cfg.Mode == ModeInProc {
		st, stop, err := e.startInProc(ctx, pt, false)
		if err != nil {
			return nil, err
		}
		return &readRun{e: e, tgt: &inproc{st: st, ids: e.ids}, reads: newInprocReads(e, st, pt.class), stop: stop}, nil
	}
	n, err := node.Start(ctx, node.Config{Star: e.starCfg, Meta: e.meta, Settled: e.settled,
		NoPassIndex: !cfg.PassIndex, Addr: "127.0.0.1:0", NoAuth: true, SettleEvery: time.Hour, TrimEvery: time.Hour, ProbeEvery: time.Hour, Logger: quietLog()})
	if err != nil {
		return nil, err
	}
	c, err := client.New(n.Endpoint())
	if err != nil {
		n.Close()
		return nil, err
	}
	t := &apiTarget{c: c}
	if err := t.setup(ctx, pt, "bench"); err != nil {
		n.Close()
		return nil, err
	}
	e.ids = t.ids
	return &readRun{e: e, tgt: t, reads: &apiReads{c: c, names: t.names}, stop: n.Close}, nil
}

// runRead runs one read point.
func runRead(ctx context.Context, cfg Config, pt point) (Result, error) {
	rr, err := startRead(ctx, cfg, pt)
	if err != nil {
		return Result{}, err
	}
	rr.flushBytes, rr.flushAge = cfg.FlushBytes, cfg.FlushAge
	defer rr.stop()
	if pt.workload == WorkTail {
		return rr.tailRun(ctx, cfg, pt)
	}
	return rr.catchupRun(ctx, cfg, pt)
}

// tailRun: readers tail every stream from seq 0 while the producers
// append at the offered rate; each record's end-to-end latency counts
// from its batch's scheduled send (stamped in its body) to its delivery.
func (rr *readRun) tailRun(ctx context.Context, cfg Config, pt point) (Result, error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	from, to := start.Add(cfg.Warmup), start.Add(cfg.Warmup+cfg.Duration)
	var checkers []*checker
	errs := make(chan error, pt.streams*pt.readers)
	var wg sync.WaitGroup
	for s := 0; s < pt.streams; s++ {
		for i := 0; i < pt.readers; i++ {
			c := &checker{stream: s, e2e: newHist(0), from: from, to: to, now: time.Now}
			checkers = append(checkers, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := rr.reads.session(rctx, s, false, c); err != nil && rctx.Err() == nil {
					errs <- err
				}
			}()
		}
	}
	c0 := cpuTime()
	pt.stamp = true
	r, err := measureAt(ctx, cfg, pt, rr.e, rr.tgt, start)
	c1 := cpuTime()
	if err != nil {
		return r, err
	}
	// Every reader reaches its stream's final tail.
	if err := rr.caughtUp(ctx, checkers, 30*time.Second, errs); err != nil {
		return r, err
	}
	cancel()
	wg.Wait()
	rs := &ReadStats{Workload: WorkTail, Readers: pt.readers, Seconds: r.Seconds}
	e2e := newHist(0)
	for _, c := range checkers {
		e2e.merge(c.e2e)
		rs.Records += int64(c.next.Load())
	}
	rs.EndToEnd, r.e2e = e2e.percentiles(), e2e
	rs.GapP50Ms, rs.GapP99Ms, rs.GapP999Ms = rs.EndToEnd.P50-r.Ack.P50, rs.EndToEnd.P99-r.Ack.P99, rs.EndToEnd.P999-r.Ack.P999
	rs.CPUSeconds = (c1 - c0).Seconds()
	// Delivered in the window: the readers' share of the acked bytes.
	gb := float64(r.Records) * float64(pt.recordBytes) * float64(pt.readers) / (1 << 30)
	rs.MBps = r.MBps * float64(pt.readers)
	if gb > 0 {
		rs.CPUSecondsPerGB = rs.CPUSeconds / gb
	}
	r.Read = rs
	return r, nil
}

// caughtUp waits until every checker has read its stream to the tail.
func (rr *readRun) caughtUp(ctx context.Context, cs []*checker, limit time.Duration, errs <-chan error) error {
	deadline := time.Now().Add(limit)
	tails := map[int]uint64{}
	for {
		select {
		case err := <-errs:
			return err
		default:
		}
		behind := 0
		for _, c := range cs {
			t, ok := tails[c.stream]
			if !ok {
				var err error
				if t, err = rr.reads.tail(ctx, c.stream); err != nil {
					return err
				}
				tails[c.stream] = t
			}
			if c.next.Load() < t {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d readers short of the tail after %s", behind, len(cs), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// catchupRun: the producers write the backlog (SettledPct of it settled
// before the rest is written), then readers read every stream from seq 0
// to the tail; the window is the read.
func (rr *readRun) catchupRun(ctx context.Context, cfg Config, pt point) (Result, error) {
	r := Result{Name: pt.name(cfg.Mode) + orderSuffix(cfg), Mode: cfg.Mode, Class: pt.class.String(), Workload: WorkCatchup, Producers: pt.producers,
		Streams: pt.streams, RecordBytes: pt.recordBytes, RecordsPerBatch: cfg.recordsPerBatch(pt.recordBytes), PassIndex: cfg.PassIndex}
	total := int64(cfg.BacklogMB) * 1e6
	settledPart := total * int64(cfg.SettledPct) / 100
	if err := fill(ctx, cfg, pt, rr.tgt, settledPart); err != nil {
		return r, fmt.Errorf("write the backlog: %w", err)
	}
	if settledPart > 0 {
		if err := rr.settleAll(ctx); err != nil {
			return r, err
		}
	}
	if err := fill(ctx, cfg, pt, rr.tgt, total-settledPart); err != nil {
		return r, fmt.Errorf("write the backlog: %w", err)
	}
	if err := rr.absorbed(ctx); err != nil {
		return r, err
	}
	e := rr.e
	m0, g0, gb0, s0 := e.meta.Snapshot(), e.gets.gets.Load(), e.gets.bytes.Load(), e.settledGets.gets.Load()
	sb0 := e.settledGets.bytes.Load()
	mem := newMemSampler()
	if cfg.ReadWindow != nil {
		cfg.ReadWindow(true)
	}
	c0 := cpuTime()
	start := time.Now()
	var checkers []*checker
	var wg sync.WaitGroup
	errs := make(chan error, pt.streams*pt.readers)
	for s := 0; s < pt.streams; s++ {
		for i := 0; i < pt.readers; i++ {
			c := &checker{stream: s, now: time.Now}
			checkers = append(checkers, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := rr.reads.session(ctx, s, true, c); err != nil {
					errs <- err
				}
				c.done = time.Now()
			}()
		}
	}
	wg.Wait()
	end := time.Now()
	c1 := cpuTime()
	if cfg.ReadWindow != nil {
		cfg.ReadWindow(false)
	}
	mem.sample()
	close(errs)
	for err := range errs {
		return r, fmt.Errorf("catch-up reader: %w", err)
	}
	rs := &ReadStats{Workload: WorkCatchup, Readers: pt.readers, BacklogMB: float64(total) / 1e6, SettledPct: cfg.SettledPct}
	win := end.Sub(start).Seconds()
	rs.Seconds = win
	var bytes int64
	rs.ReaderMBpsMin = -1
	for _, c := range checkers {
		t, err := rr.reads.tail(ctx, c.stream)
		if err != nil {
			return r, err
		}
		if got := c.next.Load(); got != t {
			return r, fmt.Errorf("%w: stream %d: a reader ended at %d, the tail is %d", ErrOrder, c.stream, got, t)
		}
		rs.Records += int64(c.next.Load())
		bytes += c.bytes
		mbps := float64(c.bytes) / 1e6 / c.done.Sub(start).Seconds()
		rs.ReaderMBpsMean += mbps / float64(len(checkers))
		if rs.ReaderMBpsMin < 0 || mbps < rs.ReaderMBpsMin {
			rs.ReaderMBpsMin = mbps
		}
	}
	rs.MBps = float64(bytes) / 1e6 / win
	rs.RecordsPerSec = float64(rs.Records) / win
	gib := float64(bytes) / (1 << 30)
	dm := e.meta.Snapshot().Sub(m0)
	chainGets, settledGets := e.gets.gets.Load()-g0, e.settledGets.gets.Load()-s0
	fetched := e.gets.bytes.Load() - gb0 + e.settledGets.bytes.Load() - sb0
	_, rru := requestUnits(dm)
	if gib > 0 {
		rs.ChainGetsPerGB = float64(chainGets) / gib
		rs.SettledGetsPerGB = float64(settledGets) / gib
		rs.MetaReadsPerGB = rru / gib
		rs.GetBytesPerByte = float64(fetched) / float64(bytes)
	}
	rs.CPUSeconds = (c1 - c0).Seconds()
	if gib > 0 {
		rs.CPUSecondsPerGB = rs.CPUSeconds / gib
	}
	rs.Cost = cfg.Prices.readCost(pt.class == metastore.Express, gib, chainGets, e.gets.bytes.Load()-gb0, settledGets, rru)
	r.Seconds, r.Records, r.RecordsPerSec, r.MBps = win, rs.Records, rs.RecordsPerSec, rs.MBps
	r.PeakHeapMiB, r.PeakTotalMiB = float64(mem.heap)/(1<<20), float64(mem.total)/(1<<20)
	r.PeakStoreMiB = float64(e.log.held.Load()) / (1 << 20)
	r.Read = rs
	return r, nil
}

// fill appends bytes of records (round robin over the streams, every
// producer's in-flight limit kept) and waits for every ack.
func fill(ctx context.Context, cfg Config, pt point, tgt target, bytes int64) error {
	if bytes <= 0 {
		return nil
	}
	recs := batchOf(cfg, pt)
	per := int64(len(recs) * pt.recordBytes)
	batches := (bytes + per - 1) / per
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, pt.producers)
	for p := 0; p < pt.producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, err := tgt.open(ctx, p)
			if err != nil {
				errs <- err
				return
			}
			defer pr.close()
			pending := make(chan waitFn, cfg.Inflight)
			var first error
			done := make(chan struct{})
			go func() {
				defer close(done)
				for w := range pending {
					if _, err := w(); err != nil && first == nil {
						first = err
					}
				}
			}()
			for {
				n := next.Add(1) - 1
				if n >= batches {
					break
				}
				w, err := pr.submit(ctx, int(n)%pt.streams, recs)
				if err != nil {
					first = err
					break
				}
				pending <- w
			}
			close(pending)
			<-done
			if first != nil {
				errs <- first
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// absorbed waits until the absorb has checkpointed everything released:
// the checkpoint holds still with no pass in progress for 300 ms.
func (rr *readRun) absorbed(ctx context.Context) error {
	var last metastore.Cursor
	still := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		h, err := rr.e.raw.GetHead(ctx, rr.e.chain)
		if err != nil && !errors.Is(err, metastore.ErrNotFound) {
			return err
		}
		if h.Checkpoint == last && h.Absorbing.IsZero() {
			still++
		} else {
			still = 0
		}
		last = h.Checkpoint
		if still >= 3 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("bench: the absorb did not settle down within a minute")
}

// settleAll settles everything absorbed so far (settle.Settler on the
// unbilled metastore: setting up the backlog is not part of the read).
func (rr *readRun) settleAll(ctx context.Context) error {
	if err := rr.absorbed(ctx); err != nil {
		return err
	}
	// On the pass index settle writes runs and packs and flushes by
	// FlushBytes and FlushAge (defaults: the backlog stays in runs).
	s := &settle.Settler{Meta: rr.e.raw, Sets: node.Sets(rr.e.starCfg), Settled: rr.e.settled, Log: quietLog(),
		PassIndex: rr.e.index != nil, FlushBytes: rr.flushBytes, FlushAge: rr.flushAge}
	h, err := rr.e.raw.GetHead(ctx, rr.e.chain)
	if err != nil {
		return err
	}
	for {
		cur, err := s.Run(ctx, rr.e.chain)
		if err != nil {
			return fmt.Errorf("settle the backlog: %w", err)
		}
		if !cur.Less(h.Checkpoint) {
			return nil
		}
	}
}
