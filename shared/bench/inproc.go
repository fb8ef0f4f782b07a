package bench

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/shared/trim"
	"github.com/strandlog/strand/shared/wake"
)

type slotRef struct{ epoch, slot uint64 }

type batchKey struct {
	stream format.StreamID
	first  uint64
}

type slotInfo struct {
	cut, rel time.Time
	bytes    int
}

// tracer collects the star's Trace events.
type tracer struct {
	mu      sync.Mutex
	batches map[batchKey]slotRef
	slots   map[slotRef]*slotInfo
}

func newTracer() *tracer {
	return &tracer{batches: map[batchKey]slotRef{}, slots: map[slotRef]*slotInfo{}}
}

func (t *tracer) trace(ev star.TraceEvent) {
	ref := slotRef{ev.Epoch, ev.Slot}
	t.mu.Lock()
	defer t.mu.Unlock()
	si := t.slots[ref]
	if si == nil {
		si = &slotInfo{}
		t.slots[ref] = si
	}
	switch ev.Kind {
	case star.TraceCut:
		si.cut, si.bytes = ev.At, ev.Bytes
		for _, b := range ev.Batches {
			t.batches[batchKey{b.Stream, b.FirstSeq}] = ref
		}
	case star.TraceRelease:
		si.rel = ev.At
	}
}

// env is one run's stores and star configuration.
type env struct {
	starCfg star.Config
	log     *putLog
	raw     metastore.Store
	meta    *metacount.Store
	set     []objstore.Bucket
	w       int
	tr      *tracer
	ids     []format.StreamID
	chain   metastore.ChainID
	// GETs of the chain buckets and of the settled bucket (S3 Standard),
	// each behind its class's GET model.
	gets, settledGets *getCount
	settled           objstore.Bucket
	// index is where the absorb puts pass indexes (the settled bucket,
	// its PUTs counted in indexPuts), nil without Config.PassIndex.
	index     objstore.Bucket
	indexPuts *atomic.Int64
	// settle, with the pass index and Config.SettleEvery >= 0: settle and
	// trim run in the window (settlement), their settled-bucket PUTs and
	// LISTs counted in settlePuts.
	settle     *settle.Settler
	trim       *trim.Trimmer
	settleTick time.Duration
	settlePuts *atomic.Int64
	settleRes  settleCounts
	// heap: the process's heap before and after the streams opened (set
	// by runPoint; measureAt adds the end).
	heap *HeapFigures
}

func newEnv(cfg Config, pt point) *env {
	e := &env{log: newPutLog(cfg.Prices.ExpressUploadFreeB), raw: metastore.NewMem(), tr: newTracer(), ids: streamIDs(cfg.Seed, pt.streams)}
	e.meta = metacount.New(e.raw)
	sc := star.Defaults()
	sc.Rand = seeded{rand.New(rand.NewPCG(uint64(cfg.Seed), 5))}
	sc.Trace = e.tr.trace
	if cfg.ReleaseEventInterval > 0 {
		sc.ReleaseEventInterval = cfg.ReleaseEventInterval
	}
	k, lat, gm := 1, cfg.StandardPut, cfg.StandardGet
	if pt.class == metastore.Express {
		k, lat, gm = cfg.ExpressK, cfg.ExpressPut, cfg.ExpressGet
	}
	e.gets, e.settledGets = &getCount{}, &getCount{}
	first := newLognormal(cfg.Seed, 11, gm.FirstByte)
	var settled objstore.Bucket = objstore.NewMem("settled")
	if cfg.Mode == ModeInProc && (pt.workload == "" || pt.workload == WorkWrite) {
		settled = &settledSink{Bucket: settled}
	}
	e.settled = withGetModel(settled, cfg.StandardGet, newLognormal(cfg.Seed, 12, cfg.StandardGet.FirstByte), e.settledGets)
	e.indexPuts, e.settlePuts = &atomic.Int64{}, &atomic.Int64{}
	if cfg.PassIndex {
		cp := &countingPuts{Bucket: e.settled, n: e.indexPuts}
		if cfg.SettleEvery >= 0 && cfg.Mode == ModeInProc {
			cp.settle = e.settlePuts
			e.settleTick = cfg.SettleEvery
			if e.settleTick == 0 {
				e.settleTick = DefaultSettleEvery
			}
		}
		e.settled = cp
		e.index = e.settled
	}
	var names []string
	for i := 0; i < k; i++ {
		names = append(names, fmt.Sprintf("%s-%d", pt.class, i))
	}
	// One body for the K copies of a slot: the buckets' memory is the
	// process's here, not S3's (objstore.NewMemSet).
	for i, b := range objstore.NewMemSet(names...) {
		inj := objstore.NewInjector(cfg.Seed*100 + int64(i))
		_ = inj.SetLatency(lat.P50, lat.P99, objstore.OpPut) // validated in Config.Validate
		// The modelled latency is the whole S3 PUT: the memory bucket's
		// copy of the body (S3's keeping of the bytes, ADR 0068) runs
		// inside it, not after it. That copy lands in new memory while
		// the heap grows (the default mode's chain behind settle), where
		// it added about 0.7 ms to a 1 MiB flight's PUTs (issue 36).
		inj.SetPutLatencyCoversCall(time.Now)
		e.set = append(e.set, withGetModel(&recording{Bucket: objstore.WithFaults(b, inj), log: e.log}, gm, first, e.gets))
	}
	if pt.class == metastore.Express {
		e.w = cfg.ExpressW
		sc.Express.BucketNames, sc.Express.Buckets, sc.Express.W = names, e.set, e.w
		if pt.flush > 0 {
			sc.Express.FlushDeadline = pt.flush
		}
		sc.Express.IdleCut = cfg.ExpressIdleCut
		if cfg.ExpressFlightKiB > 0 {
			sc.Express.FlightKiB = cfg.ExpressFlightKiB
		}
		sc.Standard = star.ClassConfig{}
	} else {
		e.w = 1
		sc.Standard.BucketNames, sc.Standard.Buckets, sc.Standard.W = names, e.set, 1
		if pt.flush > 0 {
			sc.Standard.FlushDeadline = pt.flush
		}
		sc.Standard.IdleCut = cfg.StandardIdleCut
		if cfg.StandardKiB > 0 {
			sc.Standard.FlightKiB = cfg.StandardKiB
		}
		sc.Express = star.ClassConfig{}
	}
	e.starCfg = sc
	e.chain = metastore.ChainID{Star: sc.StarID, Class: pt.class}
	if e.settleTick > 0 {
		sets := node.Sets(sc)
		e.settle = &settle.Settler{Meta: e.meta, Sets: sets, Settled: e.settled, Log: quietLog(), PassIndex: true, CPUWorkers: 1,
			FlushBytes: cfg.FlushBytes, FlushAge: cfg.FlushAge, Fanout: cfg.Fanout}
		e.trim = &trim.Trimmer{Meta: e.meta, Sets: sets, Settled: e.settled, Log: quietLog(), PassIndex: true}
	}
	return e
}

// settleCounts are what settlement did (settlement), read at the window's
// edges.
type settleCounts struct {
	steps, flushes, packed, packs, errors atomic.Int64
	merges, mergedStreams                 atomic.Int64 // design 014, level 2
	// slots and bytes: the chain slots the steps settled and their bytes
	// (one copy's).
	slots, bytes atomic.Int64
}

// settlement runs settle and trim over the counted metastore and buckets
// (design 014 level 1 on the pass index: runs, packs and flushes), in
// place of the janitor. While settle is behind the checkpoint it steps
// back to back, a trim after each step, as one settle run does; caught
// up, it waits settleTick. (It used to wait settleTick before its first
// step: at full speed the backlog that piled up by then made a step
// longer than the window, so the report said 0 steps.)
func (e *env) settlement(ctx context.Context) {
	t := time.NewTicker(e.settleTick)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			res, err := e.settle.Step(ctx, e.chain)
			if err != nil {
				if ctx.Err() == nil {
					e.settleRes.errors.Add(1)
					quietLog().Warn("bench: settle", "err", err)
				}
				break
			}
			if res.From == res.To {
				break
			}
			e.settleRes.steps.Add(1)
			e.settleRes.flushes.Add(int64(res.Flushes))
			e.settleRes.packed.Add(int64(res.Packed))
			e.settleRes.packs.Add(int64(res.Packs))
			e.settleRes.merges.Add(int64(res.Merges))
			e.settleRes.mergedStreams.Add(int64(res.MergedStreams))
			if res.From.Epoch == res.To.Epoch {
				e.settleRes.slots.Add(int64(res.To.Slot - res.From.Slot))
				e.settleRes.bytes.Add(e.log.span(e.chain.Star, res.From.Epoch, res.From.Slot, res.To.Slot))
			}
			if _, err := e.trim.Run(ctx, e.chain); err != nil && ctx.Err() == nil {
				e.settleRes.errors.Add(1)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// behind is how far settle is behind the absorb now: the slots from the
// settled cursor to the checkpoint (in the checkpoint's epoch) and their
// bytes (one copy's).
func (e *env) behind(ctx context.Context) (slots, bytes int64) {
	h, err := e.raw.GetHead(ctx, e.chain)
	if err != nil {
		return 0, 0
	}
	from := uint64(0)
	if h.Settled.Epoch == h.Checkpoint.Epoch {
		from = h.Settled.Slot
	}
	if h.Checkpoint.Slot <= from {
		return 0, 0
	}
	return int64(h.Checkpoint.Slot - from), e.log.span(e.chain.Star, h.Checkpoint.Epoch, from, h.Checkpoint.Slot)
}

// janitor stands in for settle and trim: it deletes chain slots below the
// absorb's checkpoint (read from the unwrapped store, so not billed) from
// every bucket of the set, so the memory buckets hold only the backlog.
func (e *env) janitor(ctx context.Context) {
	var done metastore.Cursor
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h, err := e.raw.GetHead(ctx, e.chain)
		if err != nil {
			continue
		}
		cp := h.Checkpoint
		if cp.Epoch != done.Epoch {
			done = metastore.Cursor{Epoch: cp.Epoch}
		}
		for s := done.Slot; s < cp.Slot; s++ {
			key := format.SlotKey(e.chain.Star, cp.Epoch, s)
			for _, b := range e.set {
				_ = b.Delete(ctx, key)
			}
		}
		done.Slot = max(done.Slot, cp.Slot)
	}
}

// inproc drives star.Submit directly.
type inproc struct {
	st   *star.Star
	ids  []format.StreamID
	idem bool // producers append with a producer id and batch seq
}

// inprocProducer is one producer goroutine's target; with idem it is an
// idempotent producer (its batch seqs per stream in next).
type inprocProducer struct {
	t    *inproc
	id   format.ProducerID
	next map[int]uint64
}

func (t *inproc) open(_ context.Context, i int) (producerTarget, error) {
	p := &inprocProducer{t: t}
	if t.idem {
		binary.BigEndian.PutUint64(p.id[8:], uint64(i)+1)
		p.next = map[int]uint64{}
	}
	return p, nil
}
func (t *inproc) streamID(i int) format.StreamID { return t.ids[i] }

func (p *inprocProducer) submit(ctx context.Context, stream int, recs []format.Record) (waitFn, error) {
	var opt star.AppendOptions
	if p.t.idem {
		opt.Producer, opt.BatchSeq = p.id, p.next[stream]
	}
	pend, err := p.t.st.Submit(ctx, p.t.ids[stream], recs, opt)
	if err != nil {
		return nil, err
	}
	if p.t.idem {
		p.next[stream]++
	}
	return func() (uint64, error) {
		a, err := pend.Wait(ctx)
		return a.FirstSeq, err
	}, nil
}

func (*inprocProducer) close() {}

// runPoint runs one point in cfg.Mode.
func runPoint(ctx context.Context, cfg Config, pt point) (Result, error) {
	switch cfg.Mode {
	case ModeAPI:
		return runAPI(ctx, cfg, pt)
	case ModeRemote:
		return runRemote(ctx, cfg, pt)
	}
	base := heapInuse()
	e := newEnv(cfg, pt)
	st, stop, err := e.startInProc(ctx, pt, true)
	if err != nil {
		return Result{}, err
	}
	defer stop()
	open := heapInuse()
	e.heap = &HeapFigures{BaseMiB: mib(base), OpenMiB: mib(open), PerStream: (float64(open) - float64(base)) / float64(pt.streams)}
	return measure(ctx, cfg, pt, e, &inproc{st: st, ids: e.ids, idem: cfg.Idempotent})
}

// startInProc starts a star on e's stores with the in-process absorb (and
// the janitor, when asked) and creates and opens pt's streams. stop ends
// it all.
func (e *env) startInProc(ctx context.Context, pt point, janitor bool) (*star.Star, func(), error) {
	abs := &absorb.Absorber{Meta: e.meta, Sets: node.Sets(e.starCfg), Log: quietLog(), Index: e.index}
	local := wake.NewLocal(abs, nil, quietLog())
	st, err := star.New(e.starCfg, e.meta, star.Options{Waker: local, Absorber: abs,
		NewFencer: func(id string, cc star.ClassConfig) star.Fencer {
			return chain.Set{Star: id, Buckets: cc.Buckets, W: cc.W}
		}})
	if err != nil {
		return nil, nil, err
	}
	local.SetObserver(st)
	st.SetAbsorbHealth(local.Health)
	if err := st.Start(ctx); err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); local.Run(runCtx, time.Second) }()
	switch {
	case janitor && e.settle != nil:
		bg.Add(1)
		go func() { defer bg.Done(); e.settlement(runCtx) }()
	case janitor:
		bg.Add(1)
		go func() { defer bg.Done(); e.janitor(runCtx) }()
	}
	stop := func() { cancel(); bg.Wait(); st.Close() }
	for i, id := range e.ids {
		if _, err := e.raw.CreateStream(ctx, metastore.Stream{Name: streamName(i, id), ID: id.String(), Class: pt.class, Star: st.ID(), State: metastore.StreamActive}); err != nil {
			stop()
			return nil, nil, err
		}
		if err := st.Open(star.StreamInfo{ID: id, Class: pt.class}); err != nil {
			stop()
			return nil, nil, err
		}
	}
	return st, stop, nil
}

// measure drives tgt and analyzes the run against e's records.
func measure(ctx context.Context, cfg Config, pt point, e *env, tgt target) (Result, error) {
	return measureAt(ctx, cfg, pt, e, tgt, time.Time{})
}

// measureAt is measure with the run starting at start (zero: now).
func measureAt(ctx context.Context, cfg Config, pt point, e *env, tgt target, start time.Time) (Result, error) {
	d := &driveOut{mem: newMemSampler(), start: start}
	var c0, c1 metacount.Counts
	var p0, p1, b0, b1, o0, o1, i0, i1 int64
	var s0, s1 [11]int64 // settle PUTs, chain GETs, settled GETs, steps, flushes, packed, packs, merges, merged streams, slots, bytes
	settleNow := func() [11]int64 {
		return [11]int64{e.settlePuts.Load(), e.gets.gets.Load(), e.settledGets.gets.Load(),
			e.settleRes.steps.Load(), e.settleRes.flushes.Load(), e.settleRes.packed.Load(), e.settleRes.packs.Load(),
			e.settleRes.merges.Load(), e.settleRes.mergedStreams.Load(), e.settleRes.slots.Load(), e.settleRes.bytes.Load()}
	}
	var behindSlots, behindBytes int64
	var cpu0, cpu1 time.Duration
	var sch0, sch1 schedSnap
	if e != nil {
		d.store = e.log.held.Load
		d.onWindow = func() {
			if cfg.WriteWindow != nil {
				cfg.WriteWindow(true)
			}
			sch0 = takeSched()
			cpu0 = cpuTime()
			c0 = e.meta.Snapshot()
			p0, b0, o0, i0 = e.log.puts.Load(), e.log.bytes.Load(), e.log.overFree.Load(), e.indexPuts.Load()
			s0 = settleNow()
		}
		d.onEnd = func() {
			if cfg.endWhen != nil {
				for !cfg.endWhen(e.meta.Snapshot().Sub(c0)) && ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
			cpu1 = cpuTime()
			sch1 = takeSched()
			if cfg.WriteWindow != nil {
				cfg.WriteWindow(false)
			}
			c1 = e.meta.Snapshot()
			p1, b1, o1, i1 = e.log.puts.Load(), e.log.bytes.Load(), e.log.overFree.Load(), e.indexPuts.Load()
			s1 = settleNow()
			if e.settle != nil {
				behindSlots, behindBytes = e.behind(ctx)
			}
		}
	}
	drive(ctx, cfg, pt, tgt, d)
	var heapEnd uint64
	if e != nil && e.heap != nil {
		heapEnd = heapInuse()
	}
	r := Result{Name: pt.name(cfg.Mode) + orderSuffix(cfg), Mode: cfg.Mode, Workload: pt.workload, Class: pt.class.String(), Producers: pt.producers, Streams: pt.streams,
		RecordBytes: pt.recordBytes, RecordsPerBatch: cfg.recordsPerBatch(pt.recordBytes), OfferedMBps: pt.rate, StreamOrder: cfg.StreamOrder, PassIndex: cfg.PassIndex,
		Errors: d.errors, Timeline: d.timeline,
		PeakHeapMiB: float64(d.mem.heap) / (1 << 20), PeakTotalMiB: float64(d.mem.total) / (1 << 20), PeakStoreMiB: float64(d.peakStore) / (1 << 20)}
	if e != nil {
		cc := e.starCfg.Standard
		if pt.class == metastore.Express {
			cc = e.starCfg.Express
		}
		r.FlushDeadlineMs, r.IdleCut = ms(cc.FlushDeadline), cc.IdleCut
	}
	win := d.end.Sub(d.winStart).Seconds()
	r.Seconds = win
	var bodyBytes int64
	var acks, lag []time.Duration
	for _, s := range d.samples {
		if s.sched.Before(d.winStart) || !s.sched.Before(d.end) {
			continue
		}
		acks = append(acks, s.ack.Sub(s.sched))
		lag = append(lag, s.sub.Sub(s.sched))
		if s.ack.Before(d.end) {
			r.Batches++
			r.Records += int64(s.records)
			bodyBytes += int64(s.bytes)
		}
	}
	if len(acks) == 0 {
		if d.firstErr != nil {
			return r, fmt.Errorf("no batch acknowledged: %w", d.firstErr)
		}
		return r, fmt.Errorf("no batch acknowledged in the window")
	}
	r.MBps = float64(bodyBytes) / 1e6 / win
	r.RecordsPerSec = float64(r.Records) / win
	r.acks = append([]time.Duration(nil), acks...)
	r.Ack, r.SendLag = summarize(acks), summarize(lag)
	if e == nil {
		return r, nil
	}
	if e.heap != nil {
		h := *e.heap
		h.EndMiB = mib(heapEnd)
		r.Heap = &h
	}
	e.floors(d, &r)
	r.CPUSeconds, r.LoadAvg = (cpu1 - cpu0).Seconds(), loadAvg()
	r.SchedWait, r.GCPause = schedWait(sch0, sch1)
	if bodyBytes > 0 {
		r.CPUSecondsPerGB = r.CPUSeconds / (float64(bodyBytes) / (1 << 30))
	}
	snap := d.snapEnd.Sub(d.snapStart).Seconds()
	dc := c1.Sub(c0)
	r.MetaOps = map[string]int64{}
	for _, op := range metacount.Ops() {
		if n := dc.Of(op); n > 0 {
			r.MetaOps[op.String()] = n
		}
	}
	r.MetaOpsPerSec = float64(dc.Total()) / snap
	r.MetaWritesPerSec = float64(dc.Writes()) / snap
	r.MetaItemWritesPerSec = float64(dc.Items) / snap
	r.MetaWRUPerSec, r.MetaRRUPerSec = float64(dc.WRU)/snap, float64(dc.RRU)/snap
	gbWin := float64(bodyBytes) / (1 << 30) * snap / win // bodies over the snapshot's span
	if gbWin > 0 {
		r.PutsPerGB = float64(p1-p0) / gbWin
	}
	n := Counted{GB: gbWin, Seconds: snap, ChainPuts: p1 - p0, ChainBytes: b1 - b0, ChainPutsOv: o1 - o0, K: len(e.set),
		Passes: dc.Of(metacount.BeginAbsorb), IndexPuts: i1 - i0}
	if e.settle != nil {
		n.SettleMeasured, n.SettlePuts, n.ChainGets, n.SettledGets = true, s1[0]-s0[0], s1[1]-s0[1], s1[2]-s0[2]
		r.Settle = &SettleFigures{EveryS: e.settleTick.Seconds(), FlushBytes: e.settle.FlushBytes, FlushAgeS: e.settle.FlushAge.Seconds(),
			Steps: s1[3] - s0[3], Flushes: s1[4] - s0[4], Packed: s1[5] - s0[5], Packs: s1[6] - s0[6], Requests: s1[0] - s0[0],
			Merges: s1[7] - s0[7], MergedStreams: s1[8] - s0[8], Fanout: e.settle.Fanout,
			SettleRefs: dc.Of(metacount.SettleRef), Errors: e.settleRes.errors.Load(),
			Slots: s1[9] - s0[9], MB: float64(s1[10]-s0[10]) / 1e6, BehindSlots: behindSlots, BehindMB: float64(behindBytes) / 1e6}
		if win > 0 {
			r.Settle.MBps = r.Settle.MB / win
		}
		if r.Settle.Fanout == 0 {
			r.Settle.Fanout = settle.DefaultFanout
		}
		if r.Settle.FlushBytes == 0 {
			r.Settle.FlushBytes = settle.DefaultFlushBytes
		}
		if r.Settle.FlushAgeS == 0 {
			r.Settle.FlushAgeS = settle.DefaultFlushAge.Seconds()
		}
	}
	n.WRU, n.RRU = requestUnits(dc)
	c := cfg.Prices.cost(pt.class == metastore.Express, n)
	r.Cost = &c
	return r, nil
}

// requestUnits is the DynamoDB request units of metastore calls, by item
// size (metacount.Units: 1 WRU per KB written, 2 in a transaction; 1 RRU
// per 4 KB read strongly consistent).
func requestUnits(c metacount.Counts) (wru, rru float64) {
	return float64(c.WRU), float64(c.RRU)
}

// floors computes the floor and the overheads of every measured batch.
func (e *env) floors(d *driveOut, r *Result) {
	e.tr.mu.Lock()
	defer e.tr.mu.Unlock()
	type fl struct {
		ref slotRef
		si  *slotInfo
		lw  time.Duration
		f   time.Time // ordered floor
		ok  bool
	}
	// Per slot: the W-th fastest PUT, and the ordered floor in slot order.
	var refs []slotRef
	for ref := range e.tr.slots {
		refs = append(refs, ref)
	}
	sortRefs(refs)
	per := make(map[slotRef]*fl, len(refs))
	var prev time.Time
	var quorum []time.Duration
	var rel []time.Duration
	var flightBytes int64
	for _, ref := range refs {
		si := e.tr.slots[ref]
		key := format.SlotKey(e.chain.Star, ref.epoch, ref.slot)
		lw, ok := e.log.wth(key, e.w)
		x := &fl{ref: ref, si: si, lw: lw, ok: ok && !si.cut.IsZero()}
		if x.ok {
			f := si.cut.Add(lw)
			if f.Before(prev) {
				f = prev
			}
			x.f, prev = f, f
			if !si.cut.Before(d.winStart) && si.cut.Before(d.end) {
				quorum = append(quorum, lw)
				r.Flights++
				flightBytes += int64(si.bytes)
				if !si.rel.IsZero() {
					rel = append(rel, si.rel.Sub(si.cut)-lw)
				}
			}
		}
		per[ref] = x
	}
	var floor, over, ord, cutw []time.Duration
	for _, s := range d.samples {
		if s.sched.Before(d.winStart) || !s.sched.Before(d.end) {
			continue
		}
		ref, ok := e.tr.batches[batchKey{s.stream, s.first}]
		if !ok {
			continue
		}
		x := per[ref]
		if x == nil || !x.ok {
			continue
		}
		cw := x.si.cut.Sub(s.sub)
		cutw = append(cutw, cw)
		floor = append(floor, cw+x.lw)
		over = append(over, s.ack.Sub(x.si.cut)-x.lw)
		ord = append(ord, s.ack.Sub(x.f))
	}
	if r.Flights > 0 {
		r.MeanFlightKiB = float64(flightBytes) / float64(r.Flights) / 1024
	}
	r.over = append([]time.Duration(nil), over...)
	r.Floor, r.Overhead, r.OrderedOverhead, r.CutWait = summarize(floor), summarize(over), summarize(ord), summarize(cutw)
	r.QuorumPut, r.ReleaseOverhead = summarize(quorum), summarize(rel)
}

func sortRefs(refs []slotRef) {
	slices.SortFunc(refs, func(a, b slotRef) int {
		if a.epoch != b.epoch {
			return cmp.Compare(a.epoch, b.epoch)
		}
		return cmp.Compare(a.slot, b.slot)
	})
}

// streamName names the i-th bench stream: unique at any count (the index),
// and recognisable by its id's prefix. (Eight hex digits of the id alone
// collide by the birthday bound: at 100000 streams a clash is likely.)
func streamName(i int, id format.StreamID) string {
	return fmt.Sprintf("bench-%d-%s", i, id.String()[:8])
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }
