package bench

import (
	"time"

	"github.com/strandlog/strand/shared/clock"
)

// pacer schedules one producer's sends at a fixed offered rate. Latency at
// a fixed rate counts from a send's scheduled time, not from when the
// producer got round to it: a producer that fell behind (blocked on its
// in-flight limit or on admission) sends late, and stamping the actual
// send time would hide the stall from the tail (coordinated omission).
type pacer struct {
	interval time.Duration // 0: unpaced (closed loop: each send as soon as the last allows)
	next     time.Time
}

// newPacer paces sends interval apart from first.
func newPacer(first time.Time, interval time.Duration) *pacer {
	return &pacer{interval: interval, next: first}
}

// due returns the next send's scheduled time and how long to wait from
// now until it (zero when behind schedule: the send goes at once, still
// stamped with its scheduled time). Unpaced, the schedule is now.
func (p *pacer) due(now time.Time) (sched time.Time, wait time.Duration) {
	if p.interval <= 0 {
		return now, 0
	}
	sched = p.next
	p.next = p.next.Add(p.interval)
	return sched, max(0, sched.Sub(now))
}

// paceLoop sends until end (of the clock and of the schedule) or until
// send returns false. send gets the
// send's sequence number, its scheduled time and the actual time it went
// out; a latency is measured from sched.
func paceLoop(clk clock.Clock, p *pacer, end time.Time, send func(n int, sched, actual time.Time) bool) {
	for n := 0; ; n++ {
		now := clk.Now()
		if !now.Before(end) {
			return
		}
		sched, wait := p.due(now)
		if !sched.Before(end) {
			return
		}
		if wait > 0 {
			clk.Sleep(wait)
		}
		actual := clk.Now()
		if p.interval <= 0 {
			sched = actual
		}
		if !send(n, sched, actual) {
			return
		}
	}
}
