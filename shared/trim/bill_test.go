package trim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/metacount"
)

// billRun is one simulated run of the whole settlement pipeline.
type billRun struct {
	label            string
	flightsPerSec    int
	publishEveryMs   int64 // the star's publish interval; 0: one event per flight
	batch            int   // release events per SQS batch
	absorb, set, tr  metacount.Counts
	seconds          float64
	records, flights int
	passes           int64
}

func (r billRun) perSec(n int64) float64 { return float64(n) / r.seconds }

// simulate runs the star at flightsPerSec for seconds of simulated time
// with 8 streams (one record each per flight): release events every
// publishEveryMs (or per flight) into the absorb handler in SQS batches,
// settle and trim every 60 s (EventBridge rate(1 minute)). Time is
// simulated; nothing sleeps.
func simulate(t *testing.T, r billRun, seconds int) billRun {
	e := newEnv(t, 8, 0)
	e.a.MaxSlotsPerPass = 0 // defaults throughout
	e.s.MaxSlotsPerStep = 0
	e.tr.MaxSlotsPerStep = 0
	ctx := t.Context()
	counts := make([]int, len(e.ids))
	for i := range counts {
		counts[i] = 1
	}
	var pending []events.SQSMessage
	deliver := func(force bool) {
		for len(pending) >= r.batch || (force && len(pending) > 0) {
			n := min(r.batch, len(pending))
			resp, err := e.ah.HandleSQS(ctx, events.SQSEvent{Records: pending[:n]})
			if err != nil || len(resp.BatchItemFailures) > 0 {
				t.Fatalf("absorb: %+v, %v", resp, err)
			}
			pending = pending[n:]
		}
	}
	var lastPub metastore.Cursor
	const tickMs = 10
	acc := 0
	for ms := int64(tickMs); ms <= int64(seconds)*1000; ms += tickMs {
		acc += r.flightsPerSec * tickMs
		for ; acc >= 1000; acc -= 1000 {
			e.flight(counts, 0)
			r.flights++
			r.records += len(counts)
			if r.publishEveryMs == 0 {
				pending = append(pending, events.SQSMessage{MessageId: fmt.Sprint(r.flights), Body: string(absorb.NewEvent(chainX, e.star.Released()).Marshal())})
				deliver(false)
			}
		}
		if r.publishEveryMs > 0 && ms%r.publishEveryMs == 0 && e.star.Released() != lastPub {
			lastPub = e.star.Released()
			pending = append(pending, events.SQSMessage{MessageId: fmt.Sprint(ms), Body: string(absorb.NewEvent(chainX, lastPub).Marshal())})
			deliver(true)
		}
		if ms%60_000 == 0 {
			if _, err := e.s.Run(ctx, chainX); err != nil {
				t.Fatal(err)
			}
			if _, err := e.tr.Run(ctx, chainX); err != nil {
				t.Fatal(err)
			}
			if _, err := e.tr.Streams(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	deliver(true)
	r.absorb, r.set, r.tr = e.ca.Snapshot(), e.cs.Snapshot(), e.ct.Snapshot()
	r.passes = r.absorb.Of(metacount.BeginAbsorb)
	r.seconds = float64(seconds)
	// Everything published was absorbed, and reads back exactly.
	if h := e.head(); h.Checkpoint != e.star.Released() {
		t.Fatalf("%s: checkpoint %s, released %s", r.label, h.Checkpoint, e.star.Released())
	}
	e.check()
	return r
}

// TestMetastoreBill measures metastore operations per second at three
// ingest rates (1x, 3x, 10x flights and records per second), with the
// star publishing one release event per 250 ms: the bill must stay flat
// and absorb's writes in the tens per second per chain. A second series
// publishes one event per flight (no publish interval, SQS batches of 10)
// to show what coalescing buys. Reproduce and print the table with:
//
//	go test ./shared/trim -run TestMetastoreBill -v
func TestMetastoreBill(t *testing.T) {
	const seconds = 120
	var rows []billRun
	for _, mult := range []int{1, 3, 10} {
		rows = append(rows, simulate(t, billRun{label: fmt.Sprintf("%dx, event/250ms", mult), flightsPerSec: 10 * mult, publishEveryMs: 250, batch: 10}, seconds))
	}
	for _, mult := range []int{1, 3, 10} {
		rows = append(rows, simulate(t, billRun{label: fmt.Sprintf("%dx, event/flight", mult), flightsPerSec: 10 * mult, batch: 10}, seconds))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| ingest | records/s | slots/s | absorb passes/s | absorb ops/s (writes/s, ref items/s) | settle ops/s | trim ops/s | total ops/s |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		tot := r.absorb.Total() + r.set.Total() + r.tr.Total()
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.1f | %.1f (%.1f, %.1f) | %.2f | %.2f | %.1f |\n", r.label,
			r.perSec(int64(r.records)), r.perSec(int64(r.flights)), r.perSec(r.passes),
			r.perSec(r.absorb.Total()), r.perSec(r.absorb.Writes()), r.perSec(r.absorb.RefItems),
			r.perSec(r.set.Total()), r.perSec(r.tr.Total()), r.perSec(tot))
	}
	t.Log(b.String())
	total := func(r billRun) float64 { return r.perSec(r.absorb.Total() + r.set.Total() + r.tr.Total()) }
	base := rows[0]
	for _, r := range rows[1:3] {
		if total(r) > 1.15*total(base) {
			t.Errorf("%s: %.1f ops/s vs %.1f at 1x: the bill grows with ingest", r.label, total(r), total(base))
		}
		if w := r.perSec(r.absorb.Writes()); w >= 50 {
			t.Errorf("%s: absorb writes %.1f/s, want tens at most", r.label, w)
		}
	}
	// Per pass, the cost is the same whatever the pass covers.
	for _, r := range rows {
		if per := float64(r.absorb.Total()) / float64(r.passes); per > 4.05 {
			t.Errorf("%s: %.2f absorb ops per pass, want 4 (GetHead, BeginAbsorb, PutRefs, AdvanceCursor)", r.label, per)
		}
	}
}
