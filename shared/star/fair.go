package star

import "slices"

// Tenant fairness (issue 18, item 5): one tenant (an append token) must not
// fill a class's pool and upload window and so slow every other tenant on
// the star. Two rules, both pure state kept under the loglet's lock:
//
//   - Admission: the pool budget is shared among the active tenants (those
//     with bytes in the pool or a batch waiting for room). While another
//     tenant waits, a tenant may hold at most budget/active bytes (and
//     always one batch); with nobody else waiting it may use the whole
//     budget but for a reserve of budget/fairReserve kept for tenants that
//     hold nothing (work-conserving otherwise). A newcomer's first batch
//     thus enters at once, and room freed by a cut goes to the tenants
//     under their share first.
//   - Cut: the pool is one FIFO queue per tenant, and the flusher fills a
//     flight from the queues by deficit round robin (a quantum of bytes per
//     turn), so a batch admitted behind a flood rides the next flight
//     instead of waiting for the flood's bytes ahead of it to be uploaded.
//     The window's slots are thus shared too.
//
// Seqs are assigned at admission and a stream's batches must be cut in seq
// order, so a stream's pooled batches stay in one queue: a batch joins the
// queue that already holds batches of its stream (a stream two tokens
// append to is served in the order of its seqs), else its tenant's queue.
//
// The tenant is AppendOptions.Tenant (the API server passes the token's
// hash); "" is one tenant like any other. Config.TenantFIFO turns both
// rules off (one FIFO for everyone, as before), for comparison.

// fairReserve: 1/fairReserve of the pool budget is kept for tenants that
// hold nothing in the pool, so a newcomer's batch enters at once however
// full a flood keeps the pool.
const fairReserve = 8

// fairQuantum is the bytes a queue may cut per round-robin turn; a larger
// head batch accumulates turns (deficit round robin).
const fairQuantum = 64 << 10

// tenantQueue is one tenant's pooled batches, FIFO.
type tenantQueue struct {
	key     string
	batches []*batch
	bytes   int
	deficit int
}

// tenantState is what admission knows of an active tenant.
type tenantState struct {
	held    int // pooled bytes admitted for it
	waiting int // its batches waiting for room
}

// pool is a loglet's admitted, uncut batches: per-tenant queues served by
// deficit round robin, and the per-tenant accounting admission uses.
// Not safe for concurrent use (the loglet's mu guards it).
type pool struct {
	fifo    bool // Config.TenantFIFO: one queue, no shares
	queues  map[string]*tenantQueue
	ring    []*tenantQueue // non-empty queues, in round-robin order
	next    int            // ring index of the queue whose turn it is
	tenants map[string]*tenantState
	waiters int  // tenants with a batch waiting for room
	turn    bool // ring[next]'s turn is under way (its quantum granted)
	n       int  // batches
	bytes   int
}

func newPool(fifo bool) *pool {
	return &pool{fifo: fifo, queues: map[string]*tenantQueue{}, tenants: map[string]*tenantState{}}
}

func (p *pool) tenant(key string) *tenantState {
	t := p.tenants[key]
	if t == nil {
		t = &tenantState{}
		p.tenants[key] = t
	}
	return t
}

func (p *pool) forget(key string) {
	if t := p.tenants[key]; t != nil && t.held == 0 && t.waiting == 0 {
		delete(p.tenants, key)
	}
}

// fits reports whether a batch of size bytes of tenant key may enter now,
// with budget the pool's budget: an empty pool takes any batch; a tenant
// holding nothing takes any room; a tenant holding bytes may fill the pool
// up to budget - budget/fairReserve (the rest is kept for newcomers), and,
// while another tenant waits for room, at most its share: budget over the
// active tenants.
func (p *pool) fits(key string, size, budget int) bool {
	if p.bytes == 0 {
		return true
	}
	if p.fifo {
		return p.bytes+size <= budget
	}
	t := p.tenants[key]
	if t == nil || t.held == 0 {
		return p.bytes+size <= budget
	}
	if p.bytes+size > budget-budget/fairReserve {
		return false
	}
	others := p.waiters
	if t.waiting > 0 {
		others--
	}
	if others == 0 {
		return true // work-conserving: nobody else wants the room
	}
	return t.held+size <= budget/len(p.tenants)
}

// wait and unwait count a batch of tenant key waiting for room.
func (p *pool) wait(key string) {
	t := p.tenant(key)
	if t.waiting++; t.waiting == 1 {
		p.waiters++
	}
}

func (p *pool) unwait(key string) {
	t := p.tenant(key)
	if t.waiting--; t.waiting == 0 {
		p.waiters--
	}
	p.forget(key)
}

// push queues an admitted batch: behind its stream's pooled batches if it
// has any (seq order), else in its tenant's queue.
func (p *pool) push(b *batch) {
	st := b.st
	q := st.queue
	if q == nil || st.pooled == 0 {
		key := b.tenant
		if p.fifo {
			key = ""
		}
		q = p.queues[key]
		if q == nil {
			q = &tenantQueue{key: key}
			p.queues[key] = q
		}
	}
	if len(q.batches) == 0 {
		p.ring = append(p.ring, q)
	}
	q.batches = append(q.batches, b)
	q.bytes += b.size
	st.queue = q
	st.pooled++
	p.tenant(b.tenant).held += b.size
	p.n++
	p.bytes += b.size
}

// oldest is the earliest admitted pooled batch (nil: the pool is empty).
func (p *pool) oldest() *batch {
	var o *batch
	for _, q := range p.ring {
		if h := q.batches[0]; o == nil || h.at.Before(o.at) {
			o = h
		}
	}
	return o
}

// cutSizer is told of each batch as the cut takes it into the flight and
// returns the bytes the batch brings beside its records (the loglet: its
// stream's carried table, carry.go), which the cut counts toward the
// flight's size.
type cutSizer interface{ admitted(b *batch) int }

// cut takes the next flight's batches by deficit round robin: each turn
// adds fairQuantum to the queue's deficit and takes its head batches while
// they fit the deficit; a queue that empties loses its deficit. A flight
// that fills mid-turn ends the cut, and the turn goes on in the next one.
//
// bytes is the flight's size: its records plus what sz (nil: nothing)
// counts for each batch taken. A batch is taken while the size before it
// plus its records is at most target (the first batch whatever its size),
// then its extra is added, so a flight is at most max(target, its first
// batch) plus one batch's extra (TestPoolCutCountsTheExtras).
func (p *pool) cut(target int, sz cutSizer) (out []*batch, bytes int) {
	for len(p.ring) > 0 {
		if p.next >= len(p.ring) {
			p.next, p.turn = 0, false
		}
		q := p.ring[p.next]
		if !p.turn {
			q.deficit += fairQuantum
			p.turn = true
		}
		for len(q.batches) > 0 && q.batches[0].size <= q.deficit {
			h := q.batches[0]
			if len(out) > 0 && bytes+h.size > target {
				return out, bytes
			}
			q.batches[0] = nil
			q.batches = q.batches[1:]
			q.bytes -= h.size
			q.deficit -= h.size
			p.take(h)
			out = append(out, h)
			bytes += h.size
			if sz != nil {
				bytes += sz.admitted(h)
			}
		}
		p.turn = false
		if len(q.batches) == 0 {
			q.deficit = 0
			p.ring = slices.Delete(p.ring, p.next, p.next+1)
			delete(p.queues, q.key)
			continue
		}
		p.next++
	}
	return out, bytes
}

// take accounts a batch leaving the pool.
func (p *pool) take(b *batch) {
	b.st.pooled--
	t := p.tenant(b.tenant)
	t.held -= b.size
	p.forget(b.tenant)
	p.n--
	p.bytes -= b.size
}

// each calls fn for every pooled batch (in no particular order).
func (p *pool) each(fn func(*batch)) {
	for _, q := range p.ring {
		for _, b := range q.batches {
			fn(b)
		}
	}
}

// drop empties the pool (its batches are failed by the caller), keeping
// the counts of batches still waiting for room.
func (p *pool) drop() {
	p.each(func(b *batch) { b.st.pooled = 0; b.st.queue = nil })
	p.queues, p.ring, p.next, p.turn, p.n, p.bytes = map[string]*tenantQueue{}, nil, 0, false, 0, 0
	for k, t := range p.tenants {
		t.held = 0
		p.forget(k)
	}
}
