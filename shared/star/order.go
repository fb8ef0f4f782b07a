package star

import "fmt"

// order is the pure core of ack release: slots are claimed in sequence,
// become durable in any order, and release strictly in slot order. It does
// no I/O and reads no clock.
//
// Invariants: base <= every unreleased claimed slot < next; next-base <=
// capacity; a slot is released only when it and every earlier slot are
// durable; a released slot never becomes unreleased.
type order struct {
	base    uint64 // lowest claimed, unreleased slot
	next    uint64 // next slot to claim
	durable []bool // durable[i] is slot base+i, ring of len capacity
	cap     int
}

func newOrder(first uint64, capacity int) *order {
	if capacity < 1 {
		panic("star: window capacity must be at least 1")
	}
	return &order{base: first, next: first, durable: make([]bool, capacity), cap: capacity}
}

// full reports whether claiming must wait: capacity slots are assigned and
// unreleased.
func (o *order) full() bool { return int(o.next-o.base) >= o.cap }

// pending is the number of claimed, unreleased slots.
func (o *order) pending() int { return int(o.next - o.base) }

// claim assigns the next slot. It panics if the window is full: callers wait
// on full() first.
func (o *order) claim() uint64 {
	if o.full() {
		panic("star: claim with the pipeline window full")
	}
	s := o.next
	o.durable[s%uint64(o.cap)] = false
	o.next++
	return s
}

// markDurable records that slot reached its quorum and returns the range
// [from, to) of slots that release now (empty when an earlier slot is still
// pending).
func (o *order) markDurable(slot uint64) (from, to uint64) {
	if slot < o.base || slot >= o.next {
		panic(fmt.Sprintf("star: markDurable(%d) outside the window [%d,%d)", slot, o.base, o.next))
	}
	o.durable[slot%uint64(o.cap)] = true
	from = o.base
	for o.base < o.next && o.durable[o.base%uint64(o.cap)] {
		o.durable[o.base%uint64(o.cap)] = false
		o.base++
	}
	return from, o.base
}
