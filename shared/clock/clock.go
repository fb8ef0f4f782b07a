// Package clock is the time source protocol code takes as a parameter, so
// that a seeded simulation (or a testing/synctest bubble) controls every
// reading of time and every timer. Protocol packages never call time.Now or
// time.After directly.
package clock

import "time"

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
