package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// naive is the design a user might write: every append is one PUT of the
// encoded batch to one bucket (key streams/<id>/<first seq>), then one
// metastore item write (the index entry), then the ack. Seqs come from a
// per-stream counter; each append is independent, so a producer's
// in-flight appends run concurrently.
type naive struct {
	ids    []format.StreamID
	next   []atomic.Uint64
	bucket objstore.Bucket
	log    *putLog
	writes atomic.Int64

	meta *lognormal // the metastore write's latency
}

func (n *naive) open(context.Context, int) (producerTarget, error) { return n, nil }
func (n *naive) streamID(i int) format.StreamID                    { return n.ids[i] }
func (n *naive) close()                                            {}

func (n *naive) submit(ctx context.Context, stream int, recs []format.Record) (waitFn, error) {
	first := n.next[stream].Add(uint64(len(recs))) - uint64(len(recs))
	done := make(chan error, 1)
	go func() {
		var enc []byte
		now := time.Now().UnixMilli()
		for _, r := range recs {
			r.TimestampMs = now
			enc = format.AppendRecord(enc, r)
		}
		key := fmt.Sprintf("streams/%s/%020d", n.ids[stream], first)
		if err := n.bucket.PutIfAbsent(ctx, key, enc); err != nil {
			done <- err
			return
		}
		if err := objstore.SleepContext(ctx, n.meta.draw()); err != nil {
			done <- err
			return
		}
		n.writes.Add(1)
		_ = n.bucket.Delete(ctx, key) // keep memory bounded; not a PUT
		done <- nil
	}()
	return func() (uint64, error) { return first, <-done }, nil
}

// runNaive measures the baseline of pt with the same producers, batches
// and duration, and compares it with r.
func runNaive(ctx context.Context, cfg Config, pt point, r *Result) (*Baseline, error) {
	lat := cfg.StandardPut
	if pt.class == metastore.Express {
		lat = cfg.ExpressPut
	}
	inj := objstore.NewInjector(cfg.Seed*100 + 99)
	_ = inj.SetLatency(lat.P50, lat.P99, objstore.OpPut)
	inj.SetPutLatencyCoversCall(time.Now) // as the star's buckets (inproc.go)
	log := newPutLog(cfg.Prices.ExpressUploadFreeB)
	n := &naive{ids: streamIDs(cfg.Seed, pt.streams), next: make([]atomic.Uint64, pt.streams), log: log,
		bucket: &recording{Bucket: objstore.WithFaults(objstore.NewMem("naive"), inj), log: log},
		meta:   newLognormal(cfg.Seed, 9, cfg.MetaWrite)}
	d := &driveOut{mem: newMemSampler()}
	var p0, p1, b0, b1, w0, w1 int64
	d.onWindow = func() { p0, b0, w0 = log.puts.Load(), log.bytes.Load(), n.writes.Load() }
	d.onEnd = func() { p1, b1, w1 = log.puts.Load(), log.bytes.Load(), n.writes.Load() }
	drive(ctx, cfg, pt, n, d)
	win := d.end.Sub(d.winStart).Seconds()
	var body int64
	var recs int64
	var acks []time.Duration
	for _, s := range d.samples {
		if s.sched.Before(d.winStart) || !s.sched.Before(d.end) {
			continue
		}
		acks = append(acks, s.ack.Sub(s.sched))
		if s.ack.Before(d.end) {
			body += int64(s.bytes)
			recs += int64(s.records)
		}
	}
	if len(acks) == 0 {
		return nil, fmt.Errorf("no append acknowledged (errors: %d, first %v)", d.errors, d.firstErr)
	}
	snap := d.snapEnd.Sub(d.snapStart).Seconds()
	gb := float64(body) / (1 << 30) * snap / win
	b := &Baseline{MBps: float64(body) / 1e6 / win, RecordsPerSec: float64(recs) / win, Ack: summarize(acks),
		MetaWritesPerSec: float64(w1-w0) / snap}
	if gb > 0 {
		b.PutsPerGB = float64(p1-p0) / gb
	}
	b.Cost = cfg.Prices.naiveCost(pt.class == metastore.Express, p1-p0, b1-b0, w1-w0, gb)
	if r.PutsPerGB > 0 {
		b.PutsPerGBRatio = b.PutsPerGB / r.PutsPerGB
	}
	if r.MetaWritesPerSec > 0 {
		b.MetaWritesRatio = b.MetaWritesPerSec / r.MetaWritesPerSec
	}
	if b.MBps > 0 {
		b.ThroughputRatio = r.MBps / b.MBps
	}
	if r.Cost != nil && r.Cost.Total > 0 {
		b.CostPerGBRatio = b.Cost.Total / r.Cost.Total
	}
	return b, nil
}
