package star

import (
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/shared/format"
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
	id     format.ProducerID
	ring   []dedupEntry // the window, oldest first (len <= window)
	lastMs int64
}

func (p *producer) last() uint64 { return p.ring[len(p.ring)-1].seq }

// dedupe is one stream's producer table. Guarded by the loglet's mu. Pure:
// it takes time as milliseconds.
type dedupe struct {
	window int
	idle   int64 // ms
	max    int
	ps     map[format.ProducerID]*producer
}

func newDedupe(window int, idle time.Duration, max int) *dedupe {
	return &dedupe{window: window, idle: idle.Milliseconds(), max: max}
}

// seed installs recovered producer states (StreamInfo.Producers).
func (d *dedupe) seed(states []ProducerState, nowMs int64) {
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
		d.put(p, nowMs)
	}
}

func (d *dedupe) put(p *producer, nowMs int64) {
	if d.ps == nil {
		d.ps = map[format.ProducerID]*producer{}
	}
	if _, ok := d.ps[p.id]; !ok && len(d.ps) >= d.max {
		d.evict(nowMs)
	}
	d.ps[p.id] = p
}

// evict forgets every expired producer, and if none was, the least
// recently used one with no batch in flight (forgetting one in flight
// would admit its retry afresh).
func (d *dedupe) evict(nowMs int64) {
	var lru *producer
	n := len(d.ps)
	for id, p := range d.ps {
		inflight := p.ring[len(p.ring)-1].b != nil
		switch {
		case nowMs-p.lastMs > d.idle && !inflight:
			delete(d.ps, id)
		case !inflight && (lru == nil || p.lastMs < lru.lastMs):
			lru = p
		}
	}
	if len(d.ps) == n && lru != nil {
		delete(d.ps, lru.id)
	}
}

// verdict is check's answer for one producer batch.
type verdict struct {
	dup *dedupEntry // a retry of a remembered batch: answer with it
	err error       // refused
}

// check classifies (id, seq): next in line (zero verdict), a retry of a
// remembered batch, a gap or too old. An unknown (or expired) producer may
// start at any batch sequence.
func (d *dedupe) check(id format.ProducerID, seq uint64, nowMs int64) verdict {
	p := d.ps[id]
	if p != nil && nowMs-p.lastMs > d.idle {
		delete(d.ps, id)
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
	return verdict{dup: &p.ring[len(p.ring)-1-int(last-seq)]}
}

// admit remembers b as the producer's batch seq (check said next in line).
func (d *dedupe) admit(id format.ProducerID, seq uint64, b *batch, nowMs int64) {
	p := d.ps[id]
	if p == nil {
		p = &producer{id: id}
		d.put(p, nowMs)
	}
	p.lastMs = nowMs
	if len(p.ring) == d.window {
		copy(p.ring, p.ring[1:])
		p.ring = p.ring[:len(p.ring)-1]
	}
	p.ring = append(p.ring, dedupEntry{seq: seq, b: b})
}

// find returns the entry holding b, if the window still holds it.
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

// released records b's ack (b was admitted with a producer).
func (d *dedupe) released(b *batch, a Ack) {
	if e := d.find(b.producer, b.batchSeq, b); e != nil {
		e.ack, e.b = a, nil
	}
}

// states exports the table (tests, and the durable form's cross-check).
func (d *dedupe) states() []ProducerState {
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
