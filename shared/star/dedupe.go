package star

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metrics"
)

// Dedupe (exactly-once appends): see doc.go and ADR 0041.
const (
	// DefaultDedupeWindow is how many of each producer's latest batches a
	// stream remembers with their acks (Kafka keeps 5).
	DefaultDedupeWindow = 8
	// DefaultProducerIdle: a producer with no batch for this long is
	// forgotten.
	DefaultProducerIdle = 7 * 24 * time.Hour
	// DefaultMaxProducers bounds the producers a stream remembers; past it
	// the least recently used one is forgotten.
	DefaultMaxProducers = 4096
	// DefaultStarMaxProducers bounds the producers the whole star
	// remembers, over every stream's table (--dedupe-max-producers); past
	// it the star's least recently used one is forgotten. At about 750
	// bytes per producer with a full window, tables included
	// (BenchmarkDedupeStarBound), about 190 MiB.
	DefaultStarMaxProducers = 1 << 18
)

// Producer errors. Neither is retriable: resending the same batch gets the
// same answer.
var (
	// ErrBatchSeqGap: the batch sequence skips ahead of the producer's next
	// one (the error names it): an earlier batch was never admitted.
	ErrBatchSeqGap = errors.New("star: producer batch sequence skips ahead")
	// ErrBatchSeqTooOld: the batch sequence is below the dedupe window, so
	// its outcome is no longer known.
	ErrBatchSeqTooOld = errors.New("star: producer batch sequence older than the dedupe window")
)

// BatchMark is one remembered producer batch: its batch sequence and seqs.
type BatchMark struct {
	BatchSeq, FirstSeq, LastSeq uint64
}

// ProducerState is a producer's durable dedupe state, as the caller
// recovers it from refs (StreamInfo.Producers): its latest batches in
// batch-sequence order, and when it was last seen.
type ProducerState struct {
	ID      format.ProducerID
	Batches []BatchMark
	LastMs  int64
}

// dedupEntry is one remembered batch: pending (b set) or committed (ack).
type dedupEntry struct {
	seq uint64
	b   *batch
	ack Ack
}

type producer struct {
	id format.ProducerID
	// tenant is the tenant of its batches (AppendOptions.Tenant; "" for
	// one recovered from refs until its next batch): the share of the
	// star's bound it counts against.
	tenant string
	ring   []dedupEntry // the window, oldest first (len <= window)
	lastMs int64
	// d is the table holding the producer; prev and next link it into the
	// star's list of forgettable producers (nil: not on it, because a
	// batch of it is in flight).
	d          *dedupe
	prev, next *producer
}

func (p *producer) last() uint64 { return p.ring[len(p.ring)-1].seq }

// inflight reports whether a batch the window holds is still pending:
// forgetting the producer then would admit that batch's retry afresh.
func (p *producer) inflight() bool {
	for i := range p.ring {
		if p.ring[i].b != nil {
			return true
		}
	}
	return false
}

// Evictions, by cause (the strand_dedupe_forgotten_total label).
const (
	forgotIdle = iota
	forgotStream
	forgotStar
	forgotCauses
)

// producerLRU is the star-wide bound on the dedupe tables: it counts the
// producers every stream's table remembers, per tenant, and keeps each
// tenant's forgettable ones (no batch in flight) in a list, most recently
// used first. "Used" means a batch of the producer was acknowledged (its
// last pending one), a retry was answered from its window, or it was
// seeded; a producer with a batch in flight is off the lists and never
// forgotten. When a new producer would take the count past max, the least
// recently used forgettable producer of the tenant remembering the most
// producers (in whichever stream) is forgotten first: one tenant's many
// producers evict its own, never a smaller tenant's (issue 31; with one
// tenant this is the star's least recently used producer); when every
// remembered producer has a batch in flight the new one is remembered
// anyway, and the excess is forgotten as soon as acknowledgements make
// producers forgettable (released), so the count never exceeds max plus
// the producers with a batch in flight at that moment.
//
// mu guards every table's producer map, the list and the counts (each
// producer's window is guarded by its stream's loglet mu). It is a leaf
// lock: taken under a loglet's mu (or the star's mu in Open), it never
// takes another lock, so no order between loglets arises.
type producerLRU struct {
	mu      sync.Mutex
	max     int
	n       int
	tenants map[string]*share
	forgot  [forgotCauses]uint64
	m       [forgotCauses]*metrics.Counter // nil in the pure tests
}

// share is one tenant's producers in the star's bound.
type share struct {
	n    int      // remembered, in flight or not
	list producer // sentinel: list.next is the most recent, list.prev the least
}

func newProducerLRU(max int) *producerLRU {
	return &producerLRU{max: max, tenants: map[string]*share{}}
}

// share returns the tenant's share, made if new.
func (u *producerLRU) share(tenant string) *share {
	sh := u.tenants[tenant]
	if sh == nil {
		sh = &share{}
		sh.list.next, sh.list.prev = &sh.list, &sh.list
		u.tenants[tenant] = sh
	}
	return sh
}

// count adds one remembered producer of p's tenant.
func (u *producerLRU) count(p *producer) {
	u.n++
	u.share(p.tenant).n++
}

// uncount removes one remembered producer of p's tenant.
func (u *producerLRU) uncount(p *producer) {
	u.n--
	if sh := u.tenants[p.tenant]; sh != nil {
		if sh.n--; sh.n <= 0 {
			delete(u.tenants, p.tenant)
		}
	}
}

// retag moves p to tenant's share (a recovered producer's first batch).
func (u *producerLRU) retag(p *producer, tenant string) {
	if p.tenant == tenant {
		return
	}
	u.unlink(p)
	u.uncount(p)
	p.tenant = tenant
	u.count(p)
}

func (u *producerLRU) unlink(p *producer) {
	if p.prev == nil {
		return
	}
	p.prev.next, p.next.prev = p.next, p.prev
	p.prev, p.next = nil, nil
}

// touch moves p to the front of its tenant's list if it may be
// forgotten.
func (u *producerLRU) touch(p *producer) {
	u.unlink(p)
	if p.inflight() {
		return
	}
	l := &u.share(p.tenant).list
	p.prev, p.next = l, l.next
	l.next.prev = p
	l.next = p
}

// forget drops p from its table and the star's count.
func (u *producerLRU) forget(p *producer, cause int) {
	u.unlink(p)
	delete(p.d.ps, p.id)
	p.d = nil
	u.uncount(p)
	u.forgot[cause]++
	if u.m[cause] != nil {
		u.m[cause].Inc()
	}
}

// register exports the count and the evictions as metrics.
func (u *producerLRU) register(reg *metrics.Registry) {
	reg.GaugeFunc("strand_dedupe_producers", "Producers the star's dedupe tables remember (exactly-once appends): at most --dedupe-max-producers plus those with a batch in flight.", func() float64 {
		u.mu.Lock()
		defer u.mu.Unlock()
		return float64(u.n)
	})
	for cause, name := range [forgotCauses]string{"idle", "stream", "star"} {
		u.m[cause] = reg.Counter("strand_dedupe_forgotten_total", "Producers the dedupe tables forgot, by cause: idle (7 days without a batch), stream (its 4,096-producer bound), star (--dedupe-max-producers).", "cause", name)
	}
}

// shrink forgets producers while the count is above limit and any may be
// forgotten: each time the least recently used forgettable one of the
// tenant remembering the most (victim).
func (u *producerLRU) shrink(limit int) {
	for u.n > limit {
		sh := u.victim()
		if sh == nil {
			return
		}
		u.forget(sh.list.prev, forgotStar)
	}
}

// victim is the share of the tenant remembering the most producers among
// those with a forgettable one (nil: none). It scans the tenants: a
// star's bound is forgotten into only once it is full.
func (u *producerLRU) victim() *share {
	var best *share
	for _, sh := range u.tenants {
		if sh.list.prev != &sh.list && (best == nil || sh.n > best.n) {
			best = sh
		}
	}
	return best
}

// Producers reports the producers the star's dedupe tables remember, and
// how many were forgotten, by cause: idle (ProducerIdle), the stream's
// bound (MaxProducers) and the star's (StarMaxProducers).
func (s *Star) Producers() (remembered int, idle, stream, star uint64) {
	u := s.lru
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n, u.forgot[forgotIdle], u.forgot[forgotStream], u.forgot[forgotStar]
}

// dedupe is one stream's producer table. Its map is guarded by lru.mu, its
// producers' windows by the loglet's mu (both are held to change a window).
// Pure: it takes time as milliseconds.
type dedupe struct {
	window int
	idle   int64 // ms
	max    int
	lru    *producerLRU
	ps     map[format.ProducerID]*producer
}

func newDedupe(window int, idle time.Duration, max int, lru *producerLRU) *dedupe {
	return &dedupe{window: window, idle: idle.Milliseconds(), max: max, lru: lru}
}

// seed installs recovered producer states (StreamInfo.Producers), within
// the stream's and the star's bounds.
func (d *dedupe) seed(states []ProducerState, nowMs int64) {
	d.lru.mu.Lock()
	defer d.lru.mu.Unlock()
	for _, s := range states {
		if len(s.Batches) == 0 || s.ID.IsZero() || nowMs-s.LastMs > d.idle {
			continue
		}
		p := &producer{id: s.ID, lastMs: s.LastMs}
		// The ring holds consecutive batch seqs: keep the consecutive tail
		// (a producer that restarted after expiry left older marks).
		bs := s.Batches
		n := 1
		for n < len(bs) && n < d.window && bs[len(bs)-n-1].BatchSeq+1 == bs[len(bs)-n].BatchSeq {
			n++
		}
		bs = bs[len(bs)-n:]
		for _, m := range bs {
			p.ring = append(p.ring, dedupEntry{seq: m.BatchSeq, ack: Ack{FirstSeq: m.FirstSeq, LastSeq: m.LastSeq}})
		}
		if old := d.ps[s.ID]; old != nil { // a second state of it: the later one wins
			d.lru.unlink(old)
			old.d = nil
			p.tenant = old.tenant // counted in its share
			p.d, d.ps[s.ID] = d, p
		} else {
			d.put(p, nowMs)
		}
		d.lru.touch(p)
	}
}

// put remembers the new producer p, first forgetting within the stream's
// bound and then the star's. Called with lru.mu.
func (d *dedupe) put(p *producer, nowMs int64) {
	if d.ps == nil {
		d.ps = map[format.ProducerID]*producer{}
	}
	if len(d.ps) >= d.max {
		d.evict(nowMs)
	}
	d.lru.shrink(d.lru.max - 1)
	p.d = d
	d.ps[p.id] = p
	d.lru.count(p)
}

// evict forgets every expired producer of the stream, and if none was, its
// least recently used one with no batch in flight (forgetting one in
// flight would admit its retry afresh). Called with lru.mu.
func (d *dedupe) evict(nowMs int64) {
	var lru *producer
	n := len(d.ps)
	for _, p := range d.ps {
		inflight := p.inflight()
		switch {
		case nowMs-p.lastMs > d.idle && !inflight:
			d.lru.forget(p, forgotIdle)
		case !inflight && (lru == nil || p.lastMs < lru.lastMs):
			lru = p
		}
	}
	if len(d.ps) == n && lru != nil {
		d.lru.forget(lru, forgotStream)
	}
}

// drop forgets the whole table (its stream left the star).
func (d *dedupe) drop() {
	d.lru.mu.Lock()
	defer d.lru.mu.Unlock()
	for _, p := range d.ps {
		d.lru.unlink(p)
		p.d = nil
		d.lru.uncount(p)
	}
	d.ps = nil
}

// verdict is check's answer for one producer batch.
type verdict struct {
	dup *dedupEntry // a retry of a remembered batch: answer with it
	err error       // refused
}

// check classifies (id, seq): next in line (zero verdict), a retry of a
// remembered batch, a gap or too old. An unknown (forgotten or expired)
// producer may start at any batch sequence. Called with the loglet's mu.
func (d *dedupe) check(id format.ProducerID, seq uint64, nowMs int64) verdict {
	d.lru.mu.Lock()
	defer d.lru.mu.Unlock()
	p := d.ps[id]
	if p != nil && nowMs-p.lastMs > d.idle && !p.inflight() {
		d.lru.forget(p, forgotIdle)
		p = nil
	}
	if p == nil {
		return verdict{}
	}
	last := p.last()
	switch {
	case seq == last+1:
		return verdict{}
	case seq > last+1:
		return verdict{err: fmt.Errorf("%w: producer %x sent batch seq %d, expected %d", ErrBatchSeqGap, id, seq, last+1)}
	case seq < p.ring[0].seq:
		return verdict{err: fmt.Errorf("%w: producer %x sent batch seq %d; the window keeps %d..%d", ErrBatchSeqTooOld, id, seq, p.ring[0].seq, last)}
	}
	e := &p.ring[len(p.ring)-1-int(last-seq)]
	if e.b == nil {
		d.lru.touch(p) // a retry answered: the producer is in use
	}
	return verdict{dup: e}
}

// admit remembers b as the producer's batch seq (check said next in line;
// if the producer has been forgotten since, it starts afresh at seq).
// Called with the loglet's mu.
func (d *dedupe) admit(id format.ProducerID, seq uint64, b *batch, nowMs int64) {
	d.lru.mu.Lock()
	defer d.lru.mu.Unlock()
	p := d.ps[id]
	if p == nil {
		p = &producer{id: id, tenant: b.tenant}
		d.put(p, nowMs)
	}
	d.lru.retag(p, b.tenant)
	p.lastMs = nowMs
	if len(p.ring) == d.window {
		copy(p.ring, p.ring[1:])
		p.ring = p.ring[:len(p.ring)-1]
	}
	p.ring = append(p.ring, dedupEntry{seq: seq, b: b})
	d.lru.unlink(p) // in flight: not forgettable until released
}

// find returns the entry holding b, if the window still holds it. Called
// with lru.mu.
func (d *dedupe) find(id format.ProducerID, seq uint64, b *batch) *dedupEntry {
	p := d.ps[id]
	if p == nil || seq > p.last() || seq < p.ring[0].seq {
		return nil
	}
	e := &p.ring[len(p.ring)-1-int(p.last()-seq)]
	if e.b != b {
		return nil
	}
	return e
}

// released records b's ack (b was admitted with a producer); a producer
// with no batch left in flight becomes forgettable, and the star's excess
// over its bound (producers remembered while every one was in flight) is
// forgotten. Called with the loglet's mu.
func (d *dedupe) released(b *batch, a Ack) {
	d.lru.mu.Lock()
	defer d.lru.mu.Unlock()
	if e := d.find(b.producer, b.batchSeq, b); e != nil {
		e.ack, e.b = a, nil
	}
	if p := d.ps[b.producer]; p != nil {
		d.lru.touch(p)
	}
	d.lru.shrink(d.lru.max)
}

// states exports the table (tests, and the durable form's cross-check).
func (d *dedupe) states() []ProducerState {
	d.lru.mu.Lock()
	defer d.lru.mu.Unlock()
	var out []ProducerState
	for _, p := range d.ps {
		s := ProducerState{ID: p.id, LastMs: p.lastMs}
		for _, e := range p.ring {
			if e.b == nil {
				s.Batches = append(s.Batches, BatchMark{BatchSeq: e.seq, FirstSeq: e.ack.FirstSeq, LastSeq: e.ack.LastSeq})
			}
		}
		out = append(out, s)
	}
	return out
}
