package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Result is one point of the matrix.
type Result struct {
	Name            string  `json:"name"`
	Mode            string  `json:"mode"`
	Workload        string  `json:"workload,omitempty"` // "": write
	Class           string  `json:"class"`
	Producers       int     `json:"producers"`
	Streams         int     `json:"streams"`
	RecordBytes     int     `json:"record_bytes"`
	RecordsPerBatch int     `json:"records_per_batch"`
	OfferedMBps     float64 `json:"offered_mbps"`                // 0: unthrottled
	StreamOrder     string  `json:"stream_order,omitempty"`      // "": sweep
	PassIndex       bool    `json:"pass_index,omitempty"`        // the star ran on the pass index
	FlushDeadlineMs float64 `json:"flush_deadline_ms,omitempty"` // the star's, in-process and API runs
	IdleCut         bool    `json:"idle_cut,omitempty"`          // the star cut at once when no flight was in the air
	Seconds         float64 `json:"seconds"`                     // measured window

	Batches       int64   `json:"batches"`
	Records       int64   `json:"records"`
	MBps          float64 `json:"mb_per_s"` // MB = 10^6 bytes of record bodies acked
	RecordsPerSec float64 `json:"records_per_s"`
	Errors        int64   `json:"errors"`

	// Ack latency counts from each batch's scheduled send time at a fixed
	// rate (no coordinated omission); SendLag is how late the producer
	// actually sent (zero unpaced, where the schedule is the send).
	Ack     Percentiles `json:"ack"`
	SendLag Percentiles `json:"send_lag,omitempty"`
	// The floor and the star's overhead above it (see the package doc).
	Floor           Percentiles `json:"floor,omitempty"`
	CutWait         Percentiles `json:"cut_wait,omitempty"`
	QuorumPut       Percentiles `json:"quorum_put,omitempty"` // per flight: its W-th fastest PUT
	Overhead        Percentiles `json:"overhead,omitempty"`
	ReleaseOverhead Percentiles `json:"release_overhead,omitempty"`
	OrderedOverhead Percentiles `json:"ordered_overhead,omitempty"`

	Flights          int64            `json:"flights,omitempty"`
	MeanFlightKiB    float64          `json:"mean_flight_kib,omitempty"`
	PutsPerGB        float64          `json:"puts_per_gb,omitempty"` // chain PUTs (every copy) per GiB of bodies
	MetaOpsPerSec    float64          `json:"metastore_ops_per_s"`
	MetaWritesPerSec float64          `json:"metastore_writes_per_s"`
	MetaOps          map[string]int64 `json:"metastore_ops,omitempty"`
	// The metastore's bill by item: item writes (every item a call puts,
	// updates, deletes or checks) and DynamoDB request units by item size
	// (metacount.Units).
	MetaItemWritesPerSec float64 `json:"metastore_item_writes_per_s"`
	MetaWRUPerSec        float64 `json:"metastore_wru_per_s"`
	MetaRRUPerSec        float64 `json:"metastore_rru_per_s"`

	// CPUSeconds is the whole process's CPU time (user and system) over
	// the window, in-process and --api: the star, the absorb, settle and
	// trim in the window, and the producers; CPUSecondsPerGB per GiB of
	// bodies acked in it. LoadAvg is the machine's one-minute load
	// average at the window's end (Linux; 0 elsewhere): on a shared
	// machine a run's throughput depends on it.
	CPUSeconds      float64 `json:"cpu_seconds,omitempty"`
	CPUSecondsPerGB float64 `json:"cpu_seconds_per_gb,omitempty"`
	// SchedWait is how long the process's goroutines waited runnable for
	// a processor over the window (the runtime's sampled histogram,
	// /sched/latencies:seconds), GCPause its stop-the-world pauses:
	// in-process, where the star shares its processors with the
	// producers, absorb, settle and trim (issue 36).
	SchedWait Percentiles `json:"sched_wait,omitzero"`
	GCPause   Percentiles `json:"gc_pause,omitzero"`
	LoadAvg   float64     `json:"load_avg,omitempty"`

	PeakHeapMiB  float64 `json:"peak_heap_mib"`
	PeakTotalMiB float64 `json:"peak_total_mib"`
	PeakStoreMiB float64 `json:"peak_store_mib,omitempty"` // held by the memory buckets (the backlog)
	// Heap in use after a GC (in-process runs): before the star started,
	// once every stream was created and opened, and at the window's end.
	// The whole process: star, memory buckets and metastore, bench trace.
	Heap *HeapFigures `json:"heap,omitempty"`
	// Settle is what settle did inside the measured window, with the pass
	// index and Config.SettleEvery (design 014 level 1).
	Settle *SettleFigures `json:"settle,omitempty"`

	Timeline []float64  `json:"timeline_mbps,omitempty"` // MB/s per sample interval
	Cost     *Cost      `json:"cost_usd_per_gb,omitempty"`
	Baseline *Baseline  `json:"baseline,omitempty"`
	Read     *ReadStats `json:"read,omitempty"` // read workloads

	// kept for plots
	acks []time.Duration
	over []time.Duration
	e2e  *hist // tail: end-to-end latency of every delivered record
}

// Baseline is the naive design measured in the same run.
type Baseline struct {
	MBps             float64     `json:"mb_per_s"`
	RecordsPerSec    float64     `json:"records_per_s"`
	Ack              Percentiles `json:"ack"`
	PutsPerGB        float64     `json:"puts_per_gb"`
	MetaWritesPerSec float64     `json:"metastore_writes_per_s"`
	Cost             Cost        `json:"cost_usd_per_gb"`
	// Ratios: naive / strand for requests and writes, strand / naive for
	// throughput.
	PutsPerGBRatio  float64 `json:"puts_per_gb_ratio"`
	MetaWritesRatio float64 `json:"metastore_writes_ratio"`
	ThroughputRatio float64 `json:"throughput_ratio"`
	CostPerGBRatio  float64 `json:"cost_per_gb_ratio"`
}

// point is one run's parameters.
type point struct {
	producers, streams, recordBytes int
	class                           metastore.Class
	rate                            float64
	flush                           time.Duration // 0: the star's default

	workload string // "" or WorkWrite: the write benchmark; WorkTail, WorkCatchup
	readers  int    // per stream (read workloads)
	stamp    bool   // producers stamp each batch's scheduled send in its bodies' first 8 bytes
}

func (p point) name(mode string) string {
	r := "max"
	if p.rate > 0 {
		r = fmt.Sprintf("%gMBps", p.rate)
	}
	if p.workload == WorkCatchup {
		return fmt.Sprintf("%s-catchup-%s-s%d-r%d-x%d", mode, p.class, p.streams, p.recordBytes, p.readers)
	}
	w := ""
	if p.workload == WorkTail {
		w = "-tail"
	}
	n := fmt.Sprintf("%s%s-%s-p%d-s%d-r%d-%s", mode, w, p.class, p.producers, p.streams, p.recordBytes, r)
	if p.flush > 0 {
		n += "-f" + p.flush.String()
	}
	if p.workload == WorkTail {
		n += fmt.Sprintf("-x%d", p.readers)
	}
	return n
}

// ratePoints expands base over the offered rates and the class's flush
// deadlines.
func (c Config) ratePoints(base point) []point {
	var out []point
	for _, rate := range c.RatesMBps {
		for _, f := range c.flushes(base.class) {
			p := base
			p.rate, p.flush = rate, f
			out = append(out, p)
		}
	}
	return out
}

// Run runs every point of cfg's matrix, one after another, printing a
// line per run to log (nil: quiet), and returns the results. Plots are
// written when cfg.PlotDir is set.
func Run(ctx context.Context, cfg Config, log io.Writer) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	var out []Result
	for _, cl := range cfg.Classes {
		for _, pr := range cfg.Producers {
			for _, st := range cfg.Streams {
				for _, rb := range cfg.RecordBytes {
					base := point{producers: pr, streams: st, recordBytes: rb, class: cl}
					var pts []point
					if cfg.writes() {
						pts = cfg.ratePoints(base)
					}
					pts = append(pts, cfg.readPoints(base)...)
					for _, pt := range pts {
						r, err := runOne(ctx, cfg, pt, log)
						if err != nil {
							return out, err
						}
						out = append(out, r)
						if ctx.Err() != nil {
							return out, ctx.Err()
						}
					}
				}
			}
		}
	}
	if cfg.PlotDir != "" {
		if err := writeStreamsPlots(cfg.PlotDir, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// writes: the write workload is asked for (it is the default).
func (c Config) writes() bool {
	return len(c.Workloads) == 0 || slices.Contains(c.Workloads, WorkWrite)
}

// runOne runs one point (and its baseline and plots).
func runOne(ctx context.Context, cfg Config, pt point, log io.Writer) (Result, error) {
	if pt.workload == WorkCatchup {
		fmt.Fprintf(log, "running %s: writing a %d MB backlog, then reading it...\n", pt.name(cfg.Mode), cfg.BacklogMB)
	} else {
		fmt.Fprintf(log, "running %s for %s (+%s warm-up)...\n", pt.name(cfg.Mode), cfg.Duration, cfg.Warmup)
	}
	if pt.workload == WorkTail || pt.workload == WorkCatchup {
		r, err := runRead(ctx, cfg, pt)
		if err != nil {
			return r, fmt.Errorf("bench %s: %w", pt.name(cfg.Mode), err)
		}
		if cfg.PlotDir != "" && pt.workload == WorkTail {
			if err := writePlots(cfg.PlotDir, &r); err != nil {
				return r, err
			}
		}
		fmt.Fprintln(log, r.Line())
		return r, nil
	}
	r, err := runPoint(ctx, cfg, pt)
	if err != nil {
		return r, fmt.Errorf("bench %s: %w", pt.name(cfg.Mode), err)
	}
	if cfg.Baseline && cfg.Mode != ModeRemote {
		fmt.Fprintf(log, "running the naive baseline of %s...\n", r.Name)
		b, err := runNaive(ctx, cfg, pt, &r)
		if err != nil {
			return r, fmt.Errorf("bench %s baseline: %w", r.Name, err)
		}
		r.Baseline = b
	}
	if cfg.PlotDir != "" {
		if err := writePlots(cfg.PlotDir, &r); err != nil {
			return r, err
		}
	}
	fmt.Fprintln(log, r.Line())
	return r, nil
}

// sample is one acknowledged batch as its producer saw it: sched is when
// it was due to be sent (at a fixed rate; the actual send unpaced), sub
// when it was submitted, ack when its ack arrived. Latency is ack - sched.
type sample struct {
	sched, sub, ack time.Time
	stream          format.StreamID
	first           uint64
	records         int
	bytes           int
}

// waitFn waits for one batch's ack and returns its first seq.
type waitFn func() (uint64, error)

// producerTarget is what a producer loop submits to.
type producerTarget interface {
	submit(ctx context.Context, stream int, recs []format.Record) (waitFn, error)
	close()
}

type target interface {
	open(ctx context.Context, producer int) (producerTarget, error)
	streamID(i int) format.StreamID
}

// drive runs the producers against tgt for warm-up + duration and returns
// the samples, the measured window and the timeline.
type driveOut struct {
	samples            []sample
	winStart, end      time.Time
	timeline           []float64
	errors             int64
	mem                *memSampler
	onWindow, onEnd    func() // called at the window's start and end (counters' snapshots)
	snapStart, snapEnd time.Time
	store              func() int64
	peakStore          int64
	firstErr           error
	start              time.Time // zero: now
}

// batchOf is pt's batch: records per batch of pt.recordBytes each, all
// sharing one patterned body.
func batchOf(cfg Config, pt point) []format.Record {
	recs := make([]format.Record, cfg.recordsPerBatch(pt.recordBytes))
	body := make([]byte, pt.recordBytes)
	for i := range body {
		body[i] = byte(i * 31)
	}
	for i := range recs {
		recs[i] = format.Record{Body: body}
	}
	return recs
}

func drive(ctx context.Context, cfg Config, pt point, tgt target, d *driveOut) {
	recs := batchOf(cfg, pt)
	nrec := len(recs)
	batchBytes := nrec * pt.recordBytes
	start := d.start
	if start.IsZero() {
		start = time.Now()
	}
	d.winStart = start.Add(cfg.Warmup)
	d.end = d.winStart.Add(cfg.Duration)
	var acked atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for p := 0; p < pt.producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []sample
			var errs int64
			var firstErr error
			fail := func(err error) {
				errs++
				if firstErr == nil {
					firstErr = err
				}
			}
			defer func() {
				mu.Lock()
				d.samples = append(d.samples, mine...)
				d.errors += errs
				if d.firstErr == nil {
					d.firstErr = firstErr
				}
				mu.Unlock()
			}()
			pr, err := tgt.open(runCtx, p)
			if err != nil {
				fail(err)
				return
			}
			defer pr.close()
			type item struct {
				sched  time.Time // scheduled send (latency counts from here)
				sub    time.Time // actual send
				stream int
				wait   waitFn
			}
			pending := make(chan item, cfg.Inflight-1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for it := range pending {
					first, err := it.wait()
					now := time.Now()
					if err != nil {
						fail(err)
						continue
					}
					if now.Before(d.end) && !it.sched.Before(d.winStart) {
						acked.Add(int64(batchBytes))
					}
					mine = append(mine, sample{sched: it.sched, sub: it.sub, ack: now, stream: tgt.streamID(it.stream), first: first, records: nrec, bytes: batchBytes})
				}
			}()
			var interval time.Duration
			if pt.rate > 0 {
				interval = time.Duration(float64(batchBytes) / (pt.rate * 1e6 / float64(pt.producers)) * float64(time.Second))
			}
			pick := streamPicker(cfg, pt, p)
			pc := newPacer(time.Now().Add(time.Duration(p)*interval/time.Duration(pt.producers)), interval)
			paceLoop(clock.Real{}, pc, d.end, func(n int, sched, actual time.Time) bool {
				if runCtx.Err() != nil {
					return false
				}
				s := pick(n)
				batch := recs
				if pt.stamp {
					batch = stamped(recs, sched)
				}
				w, err := pr.submit(runCtx, s, batch)
				if err != nil {
					fail(err)
					return !errors.Is(err, context.Canceled)
				}
				pending <- item{sched: sched, sub: actual, stream: s, wait: w}
				return true
			})
			close(pending)
			<-done
		}()
	}
	// Sampler: timeline and memory.
	stop := make(chan struct{})
	var swg sync.WaitGroup
	swg.Add(1)
	go func() {
		defer swg.Done()
		t := time.NewTicker(cfg.Sample)
		defer t.Stop()
		var last int64
		windowOpen, ended := false, false
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				d.mem.sample()
				if d.store != nil {
					d.peakStore = max(d.peakStore, d.store())
				}
				if !windowOpen && !now.Before(d.winStart) {
					windowOpen = true
					d.snapStart = now
					if d.onWindow != nil {
						d.onWindow()
					}
				}
				if !ended && !now.Before(d.end) {
					ended = true
					d.snapEnd = now
					if d.onEnd != nil {
						d.onEnd()
					}
				}
				if windowOpen && now.Before(d.end.Add(cfg.Sample/2)) {
					cur := acked.Load()
					d.timeline = append(d.timeline, float64(cur-last)/1e6/cfg.Sample.Seconds())
					last = cur
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	swg.Wait()
	if d.snapEnd.IsZero() { // the sampler stopped before the end tick
		d.snapEnd = time.Now()
		if d.snapStart.IsZero() {
			d.snapStart = d.winStart
			if d.onWindow != nil {
				d.onWindow()
			}
		}
		if d.onEnd != nil {
			d.onEnd()
		}
	}
}

// streamPicker is producer p's choice of stream for its n-th batch
// (Config.StreamOrder).
func streamPicker(cfg Config, pt point, p int) func(n int) int {
	if cfg.StreamOrder == OrderRandom {
		r := rand.New(rand.NewPCG(uint64(cfg.Seed), 1000+uint64(p)))
		return func(int) int { return r.IntN(pt.streams) }
	}
	return func(n int) int { return (p + n) % pt.streams }
}

// orderSuffix marks a run's name with a stream order other than the
// default sweep.
func orderSuffix(cfg Config) string {
	s := ""
	if cfg.StreamOrder == OrderRandom {
		s = "-random"
	}
	if cfg.PassIndex {
		s += "-pass-index"
	}
	return s
}

// stamped copies recs with one new body: the template's, its first 8
// bytes the scheduled send time (Unix ns, big-endian), for the readers'
// end-to-end latency. The star keeps the records until released, so every
// batch gets its own body.
func stamped(recs []format.Record, sched time.Time) []format.Record {
	body := append([]byte(nil), recs[0].Body...)
	binary.BigEndian.PutUint64(body, uint64(sched.UnixNano()))
	out := make([]format.Record, len(recs))
	for i := range out {
		out[i] = format.Record{Body: body}
	}
	return out
}

// streamIDs draws n stream ids from the run's seed.
func streamIDs(seed int64, n int) []format.StreamID {
	r := rand.New(rand.NewPCG(uint64(seed), 77))
	ids := make([]format.StreamID, n)
	for i := range ids {
		binary.BigEndian.PutUint64(ids[i][:8], r.Uint64())
		binary.BigEndian.PutUint64(ids[i][8:], r.Uint64())
	}
	return ids
}

// seeded is an io.Reader of seeded bytes (the star's nonces).
type seeded struct{ r *rand.Rand }

func (s seeded) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(s.r.Uint32())
	}
	return len(p), nil
}

// SettleFigures: settle (runs, packs and flush, design 014 level 1) and
// trim inside the measured window.
type SettleFigures struct {
	EveryS     float64 `json:"every_s"`
	FlushBytes int64   `json:"flush_bytes"`
	FlushAgeS  float64 `json:"flush_age_s"`
	Steps      int64   `json:"steps"`       // settle steps that moved the settled cursor
	Flushes    int64   `json:"flushes"`     // streams flushed (a ref each)
	Packed     int64   `json:"packed"`      // stream entries packed into runs
	Packs      int64   `json:"packs"`       // packs written
	Requests   int64   `json:"s3_requests"` // settled-bucket PUTs and LISTs of settle and trim
	SettleRefs int64   `json:"settle_refs"` // SettleRef calls
	Errors     int64   `json:"errors"`      // settle or trim runs that failed (retried next period)
	// Level 2 (design 014): settle's Fanout, the merged runs written or
	// adopted, and the stream entries the merges wrote.
	Fanout        int   `json:"fanout"`
	Merges        int64 `json:"merges"`
	MergedStreams int64 `json:"merged_streams"`
	// What the window's steps settled: chain slots, their MB (one copy's,
	// 10^6 bytes) and MB per second of the window; and how far settle was
	// behind the absorb's checkpoint at the window's end, in slots and MB.
	Slots       int64   `json:"slots"`
	MB          float64 `json:"mb"`
	MBps        float64 `json:"mb_per_s"`
	BehindSlots int64   `json:"behind_slots"`
	BehindMB    float64 `json:"behind_mb"`
}
