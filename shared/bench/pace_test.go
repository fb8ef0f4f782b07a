package bench

import (
	"testing"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metastore"
)

// A stall at a fixed offered rate shows in the tail: one send of a
// closed-loop producer (one batch in flight) takes 100 ms where the rest
// take 1 ms, at one send per 2 ms. Measured from the scheduled send time
// (what drive does), the ~50 sends that were due during the stall carry it;
// measured from the actual send time they would all look like 1 ms, and
// only the stalled send itself would (p99 of 1000 sends hides one).
// Virtual time: the clock is a clock.Manual that the sends advance.
func TestStallShowsInTail(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := clock.NewManual(start)
	const interval, service, stall = 2 * time.Millisecond, time.Millisecond, 100 * time.Millisecond
	fromSched, fromActual := newHist(0), newHist(0)
	sent := 0
	paceLoop(clk, newPacer(start, interval), start.Add(1000*interval), func(n int, sched, actual time.Time) bool {
		if sched != start.Add(time.Duration(n)*interval) {
			t.Fatalf("send %d scheduled at %s, want %s", n, sched.Sub(start), time.Duration(n)*interval)
		}
		if actual.Before(sched) {
			t.Fatalf("send %d went at %s before its schedule %s", n, actual.Sub(start), sched.Sub(start))
		}
		took := service
		if n == 100 {
			took = stall
		}
		clk.Sleep(took) // the send blocks: one in flight
		ack := clk.Now()
		fromSched.record(ack.Sub(sched))
		fromActual.record(ack.Sub(actual))
		sent++
		return true
	})
	// The schedule runs for 2 s; the stall delays but does not drop sends.
	if sent != 1000 {
		t.Fatalf("%d sends, want 1000 (the schedule, stall or not)", sent)
	}
	p, q := fromSched.percentiles(), fromActual.percentiles()
	if q.P99 > 1.01 {
		t.Fatalf("from actual send p99 %.3f ms: want the 1 ms service time (the stall hidden)", q.P99)
	}
	// Sends 101..150 were due during the stall: their latency falls
	// linearly from ~100 ms; 5% of sends are above 10 ms.
	if p.P99 < 50 || p.Max < 100 {
		t.Fatalf("from schedule p99 %.3f max %.3f ms: the stall does not show in the tail", p.P99, p.Max)
	}
	if p.P50 > 1.01 {
		t.Fatalf("from schedule p50 %.3f ms: the producer never caught up", p.P50)
	}
}

// Unpaced, the schedule is the send: latency from either is the same.
func TestUnpacedSchedulesNow(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := clock.NewManual(start)
	n := 0
	paceLoop(clk, newPacer(start, 0), start.Add(10*time.Millisecond), func(_ int, sched, actual time.Time) bool {
		if !sched.Equal(actual) {
			t.Fatalf("unpaced send scheduled %s, sent %s", sched, actual)
		}
		clk.Sleep(time.Millisecond)
		n++
		return true
	})
	if n != 10 {
		t.Fatalf("%d sends in 10 ms of 1 ms sends", n)
	}
}

// The histogram's quantiles agree with exact order statistics within its
// 3 significant digits, and signed samples (overheads) keep their sign.
func TestHistQuantiles(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 10000; i++ {
		xs = append(xs, time.Duration(i)*time.Microsecond-2*time.Millisecond)
	}
	p := summarize(xs)
	for _, c := range []struct{ got, want float64 }{{p.P50, 3}, {p.P99, 7.9}, {p.P999, 7.99}, {p.Max, 8}, {p.Mean, 3.0005}} {
		if d := c.got - c.want; d > 0.01 || d < -0.01 {
			t.Fatalf("%+v: got %.4f want %.4f", p, c.got, c.want)
		}
	}
	if p.N != 10000 {
		t.Fatalf("n %d", p.N)
	}
	if s := summarize([]time.Duration{-time.Millisecond, -time.Millisecond}); s.P50 > -0.99 || s.Max > -0.99 {
		t.Fatalf("negative samples lost their sign: %+v", s)
	}
}

// Bench stream names are unique at any stream count: 8 hex digits of the
// id alone collided at 100000 streams ("metastore: already exists").
func TestStreamNamesUnique(t *testing.T) {
	const n = 1000000 // the largest count docs/performance/many-streams.md runs
	ids := streamIDs(1, n)
	seen := make(map[string]int, n)
	prefixClash := false
	prefixes := make(map[string]bool, n)
	for i, id := range ids {
		name := streamName(i, id)
		if j, dup := seen[name]; dup {
			t.Fatalf("streams %d and %d both named %q", j, i, name)
		}
		seen[name] = i
		if err := metastore.ValidateStreamName(name); err != nil {
			t.Fatalf("name %q: %v", name, err)
		}
		p := id.String()[:8]
		prefixClash = prefixClash || prefixes[p]
		prefixes[p] = true
	}
	// The test has teeth: the old naming ("bench-" + 8 hex digits of the
	// id) clashes at this count and seed.
	if !prefixClash {
		t.Fatal("no 8-hex-digit prefix clash at this seed: the test would not catch the old naming")
	}
}

// The HdrHistogram's plot bins agree with binning the raw samples.
func TestHistogramOfMatchesRaw(t *testing.T) {
	var xs []time.Duration
	h := newHist(0)
	for i := 1; i <= 5000; i++ {
		x := time.Duration(i*i) * time.Microsecond / 10
		xs = append(xs, x)
		h.record(x)
	}
	raw, hd := histogram(xs), histogramOf(h)
	for i := range raw {
		if d := raw[i] - hd[i]; d > 0.01 || d < -0.01 {
			t.Fatalf("bin %d: raw %.4f hdr %.4f", i, raw[i], hd[i])
		}
	}
}
