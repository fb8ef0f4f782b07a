package star

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// TestProducerIdleAcrossRecoveries (ADR 0075): the direction of the idle
// expiry's error across recoveries, on seeded random timelines. A stream's
// producers send batches days apart (each batch its own part, with its
// own mark and the live table carried, as a flight carries it), and the
// star recovers at random times (RecoverStream over the parts, seeded
// into a new table). A carried mark has no time, so a recovered producer
// counts as seen at the recovery. Checked after every event, for every
// producer, by a retry of its last batch (dedupe.check):
//
//   - never forgotten early: within the idle bound of its last batch, the
//     retry gets the original ack, whatever recoveries came between
//     (exactly-once of a retry holds across recoveries);
//   - forgotten at most one idle bound after the later of its last batch
//     and the last recovery: the error is late only, by at most the time
//     since that recovery (a producer idle 6 days at a recovery is kept 7
//     more; one idle 8 days whose batch is in the stream's last parts,
//     past every carried table's tail, is remembered again).
func TestProducerIdleAcrossRecoveries(t *testing.T) {
	const idle = DefaultProducerIdle
	day := (24 * time.Hour).Milliseconds()
	resurrected := 0
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0x1d1e))
		newTable := func() *dedupe {
			return newDedupe(DefaultDedupeWindow, idle, DefaultMaxProducers, newProducerLRU(1<<20))
		}
		d := newTable()
		var (
			parts     []metastore.Ref
			seq       uint64
			nowMs     = int64(1_700_000_000_000)
			recovered = nowMs
			last      = map[format.ProducerID]int64{}  // each producer's last batch
			next      = map[format.ProducerID]uint64{} // its next batch seq
			acks      = map[format.ProducerID]Ack{}    // its last batch's ack
		)
		for step := range 120 {
			nowMs += rng.Int64N(3 * day)
			if step > 0 && rng.IntN(4) == 0 {
				info, err := RecoverStream(t.Context(), partsReader(parts), sid(1), metastore.Standard, time.UnixMilli(nowMs))
				if err != nil {
					t.Fatal(err)
				}
				d = newTable()
				d.seed(info.Producers, nowMs)
				recovered = nowMs
			} else {
				p := pid(byte(1 + rng.IntN(4)))
				if v := d.check(p, next[p], nowMs); v.err != nil || v.dup != nil {
					t.Fatalf("seed %d step %d: producer %x's next batch %d: %+v", seed, step, p[0], next[p], v)
				}
				below := seq
				b := &batch{producer: p, batchSeq: next[p]}
				d.admit(p, next[p], b, nowMs)
				a := Ack{FirstSeq: seq, LastSeq: seq + uint64(rng.IntN(3))}
				d.released(b, a)
				part := metastore.Ref{StreamID: sid(1).String(), FirstSeq: a.FirstSeq, LastSeq: a.LastSeq,
					Producers: []metastore.ProducerMark{{Producer: p, BatchSeq: next[p], FirstSeq: a.FirstSeq, LastSeq: a.LastSeq}}}
				if rng.IntN(3) > 0 { // the table rides some flights, not all
					for _, m := range d.carried(below, nowMs) {
						part.Carried = append(part.Carried, metastore.ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
					}
					if len(part.Carried) > 0 {
						part.CarriedBelow = below
					}
				}
				parts = append(parts, part)
				last[p], acks[p], seq = nowMs, a, a.LastSeq+1
				next[p]++
			}
			for p, at := range last {
				v := d.check(p, next[p]-1, nowMs)
				known := v.dup != nil && v.dup.ack == acks[p]
				switch {
				case nowMs-at <= idle.Milliseconds() && !known:
					t.Fatalf("seed %d step %d: producer %x, last batch %.1f days ago, forgotten early (last recovery %.1f days ago): %+v",
						seed, step, p[0], float64(nowMs-at)/float64(day), float64(nowMs-recovered)/float64(day), v)
				case nowMs-max(at, recovered) > idle.Milliseconds() && known:
					t.Fatalf("seed %d step %d: producer %x remembered %.1f days after its last batch and %.1f after the last recovery",
						seed, step, p[0], float64(nowMs-at)/float64(day), float64(nowMs-recovered)/float64(day))
				case nowMs-at > idle.Milliseconds() && known:
					resurrected++ // late: kept past its bound by a recovery
				}
			}
		}
	}
	if resurrected == 0 {
		t.Fatal("no producer was kept past its idle bound by a recovery: the timelines do not exercise the late direction")
	}
	t.Logf("%d checks found a producer kept past its idle bound by a recovery (late, never early)", resurrected)
}
