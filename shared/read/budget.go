package read

import (
	"context"
	"sync"
)

// DefaultAheadBudget is a Reader's read-ahead budget when none is given:
// the bytes that all its sessions' read-ahead may hold or have in flight
// at once. 256 MiB keeps 4 sessions at their full AheadBytes; more
// sessions share it (each still reads with what it is granted).
const DefaultAheadBudget = 256 << 20

// prefetchShare is the part of a budget that fetches ahead of the read
// (those no read is waiting for yet) may take; the rest is kept for the
// fetch a session's read waits on, so that sessions that read ahead do not
// make a session that has nothing wait behind them.
const prefetchShare = 0.75

// Budget bounds the read-ahead memory of every session of a Reader (of a
// server): the encoded bytes of the locations held (fetched, decoded, not
// yet passed) or in flight never exceed its total, however many sessions
// read. A location larger than the total is charged the total. Sessions
// take from it without waiting for read-ahead (up to prefetchShare of the
// total) and wait for the location their read needs, after giving back
// all they hold, so that a session waiting holds nothing and the holders
// are sessions reading.
type Budget struct {
	mu    sync.Mutex
	total int64
	used  int64
	peak  int64
	freed chan struct{} // closed and replaced at every give
}

// NewBudget returns a budget of total bytes (at least 1).
func NewBudget(total int64) *Budget {
	return &Budget{total: max(total, 1), freed: make(chan struct{})}
}

// Total is the budget's size.
func (b *Budget) Total() int64 { return b.total }

// Used and Peak are the bytes charged now and at most so far.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak is the most bytes charged at once.
func (b *Budget) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// charge is what a location of n bytes costs.
func (b *Budget) charge(n int64) int64 { return min(max(n, 1), b.total) }

// tryTake charges n bytes if the charge stays within frac of the total.
func (b *Budget) tryTake(n int64, frac float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if float64(b.used+n) > frac*float64(b.total) {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

// take charges n bytes (at most the total), waiting until they are free.
func (b *Budget) take(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.used+n <= b.total {
			b.used += n
			b.peak = max(b.peak, b.used)
			b.mu.Unlock()
			return nil
		}
		ch := b.freed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// give returns n bytes.
func (b *Budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		panic("read: read-ahead budget given back more than taken")
	}
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}
