package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/settle"
)

// BenchmarkSettle measures settle alone: an in-process star (memory
// buckets, the pass index) writes a backlog, the absorb takes it, and then
// settle.Step runs until the settled cursor reaches the checkpoint. It
// reports MB of record bodies settled per second of stepping, per step and
// the steps, and the process's CPU seconds per GB settled, for few large
// streams and many small ones, with the chain GETs free (model=none: what
// the code costs) and behind the bench's S3 GET models (model=s3: as in
// `strand bench`). Settle's flush threshold is
// lowered to 1 MiB so that the backlog's streams flush within the run, as
// they do at a star's full speed. Not in the default run:
//
//	go test ./shared/bench -run '^$' -bench Settle -benchtime 1x
func BenchmarkSettle(b *testing.B) {
	for _, tc := range []struct {
		name           string
		streams, bytes int
		mb             int64
	}{
		{"few-large", 16, 1024, 128},
		{"many-small", 4096, 100, 32},
	} {
		for _, model := range []string{"none", "s3"} {
			b.Run(fmt.Sprintf("%s/streams=%d/record=%d/mb=%d/model=%s", tc.name, tc.streams, tc.bytes, tc.mb, model), func(b *testing.B) {
				cfg := Defaults()
				cfg.PassIndex, cfg.Inflight = true, 64
				cfg.FlushBytes = 1 << 20
				if model == "none" {
					cfg.ExpressGet, cfg.StandardGet = GetModel{}, GetModel{}
					cfg.ExpressPut, cfg.StandardPut = Latency{}, Latency{}
				}
				pt := point{producers: 4, streams: tc.streams, recordBytes: tc.bytes, class: metastore.Express, workload: WorkCatchup}
				var settled, steps int64
				var took, cpu time.Duration
				for range b.N {
					b.StopTimer()
					d, c, n := settleOnce(b, cfg, pt, tc.mb<<20)
					b.StartTimer()
					took += d
					cpu += c
					steps += n
					settled += tc.mb << 20
				}
				s := took.Seconds()
				b.ReportMetric(float64(settled)/1e6/s, "MB/s")
				b.ReportMetric(float64(steps)/float64(b.N), "steps")
				b.ReportMetric(s/float64(steps), "s/step")
				// The process's CPU while the steps ran (the star idle):
				// what a settle Lambda's core spends per GB settled.
				b.ReportMetric(cpu.Seconds()/(float64(settled)/1e9), "CPU-s/GB")
			})
		}
	}
}

// settleOnce writes bytes of records, waits for the absorb, and times
// settle's steps to the checkpoint: how long they took, the process's CPU
// time meanwhile, and how many.
func settleOnce(b *testing.B, cfg Config, pt point, bytes int64) (time.Duration, time.Duration, int64) {
	ctx := b.Context()
	rr, err := startRead(ctx, cfg, pt)
	if err != nil {
		b.Fatal(err)
	}
	defer rr.stop()
	if err := fill(ctx, cfg, pt, rr.tgt, bytes); err != nil {
		b.Fatal(err)
	}
	if err := rr.absorbed(ctx); err != nil {
		b.Fatal(err)
	}
	h, err := rr.e.raw.GetHead(ctx, rr.e.chain)
	if err != nil {
		b.Fatal(err)
	}
	// Settle lends its objects (PutIfAbsent, ADR 0072) and a memory
	// bucket copies what it is lent, into new memory: a cost S3 does not
	// put on a settle Lambda. Its large stream objects are kept as their
	// size, as in the write workload (settledSink, ADR 0068).
	s := &settle.Settler{Meta: rr.e.raw, Sets: node.Sets(rr.e.starCfg), Settled: &settledSink{Bucket: rr.e.settled}, Log: quietLog(),
		PassIndex: true, FlushBytes: cfg.FlushBytes}
	start, cpu0 := time.Now(), cpuTime()
	var steps int64
	for {
		res, err := s.Step(ctx, rr.e.chain)
		if err != nil {
			b.Fatal(err)
		}
		steps++
		if !res.To.Less(h.Checkpoint) {
			break
		}
		if res.From == res.To {
			b.Fatalf("settle made no progress at %v, checkpoint %v", res.To, h.Checkpoint)
		}
	}
	return time.Since(start), cpuTime() - cpu0, steps
}
