// Package clock is the time source protocol code takes as a parameter, so
// that a seeded simulation (or a testing/synctest bubble) controls every
// reading of time and every timer. Protocol packages never call time.Now or
// time.After directly.
package clock

import (
	"sync/atomic"
	"time"
)

// Clock reads time and makes timers.
type Clock interface {
	Now() time.Time
	// After delivers the time on the returned channel after d.
	After(d time.Duration) <-chan time.Time
	// Sleep blocks for d.
	Sleep(d time.Duration)
}

// Real is the wall clock. Inside a testing/synctest bubble it is the
// bubble's fake clock.
type Real struct{}

func (Real) Now() time.Time                         { return time.Now() }
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (Real) Sleep(d time.Duration)                  { time.Sleep(d) }

// OrReal returns c, or Real if c is nil.
func OrReal(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Manual is a Clock that moves only when told: Set, or Sleep, which
// advances it by d at once. After fires at once with now+d. For tests of
// protocol code that reads the time (retention, grace periods) without
// timers that must wait. Safe for concurrent use. Its zero value reads the
// Unix epoch.
type Manual struct{ ns atomic.Int64 }

// NewManual returns a Manual clock reading t.
func NewManual(t time.Time) *Manual {
	m := &Manual{}
	m.Set(t)
	return m
}

// Set moves the clock to t (backward too).
func (m *Manual) Set(t time.Time) { m.ns.Store(t.UnixNano()) }

func (m *Manual) Now() time.Time { return time.Unix(0, m.ns.Load()) }

func (m *Manual) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- m.Now().Add(d)
	return ch
}

func (m *Manual) Sleep(d time.Duration) { m.ns.Add(int64(d)) }
