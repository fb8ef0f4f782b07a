package sim

import (
	"fmt"
	"strconv"
	"time"

	"testing/synctest"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/star"
)

// Idempotent producers: half of the sim's producers carry a producer id
// and batch seq (the batch's idx) and retry every batch that is not acked
// (failed at admission, shed, or of unknown outcome because a star was
// killed, halted past --halt-wait or deposed) on their next burst, with the
// same producer id and batch seq, across incarnations. checkHistory's
// invariants (every record once, at its ack's seqs, in arrival order)
// cover the retries; checkIdempotent adds that, once every fault is
// cleared, every batch of an idempotent producer is acked: zero losses.

func newProducer(i, streams int) *producer {
	p := &producer{stream: i % streams, idem: i%2 == 1, tenant: fmt.Sprint("tenant-", i%3)}
	if p.idem {
		p.pid[0], p.pid[15] = byte(i), 0x14
	}
	return p
}

func appendOptions(pr *producer, b *batchRec) star.AppendOptions {
	if !pr.idem {
		return star.AppendOptions{Tenant: pr.tenant}
	}
	return star.AppendOptions{Producer: pr.pid, BatchSeq: uint64(b.idx), Tenant: pr.tenant}
}

// outstanding returns an idempotent producer's batches that are not acked
// and not pending, in batch order, reset to pending for a retry, with
// their records. Called with s.mu held.
func (s *sim) outstanding(pi int, pr *producer) ([]*batchRec, [][]format.Record) {
	if !pr.idem {
		return nil, nil
	}
	var rs []*batchRec
	var recs [][]format.Record
	for idx := 0; idx < pr.next; idx++ {
		b := s.batches[fmt.Sprintf("%d.%d", pi, idx)]
		if b == nil || b.state == acked || b.state == pending {
			continue
		}
		// gen -1: no incarnation's own batch any more (its original may sit
		// in a zombie's or a killed star's flight while the retry is acked
		// elsewhere), so checkRelease's per-incarnation rules skip it;
		// checkHistory still holds it to exactly once at its ack's seqs.
		b.state, b.err, b.p, b.gen = pending, nil, nil, -1
		b.retries++
		totals.retries.Add(1)
		var rr []format.Record
		for _, bd := range b.bodies {
			rr = append(rr, format.Record{Body: []byte(bd), Headers: []format.Header{{Name: []byte("p"), Value: []byte(strconv.Itoa(pi))}}})
		}
		rs = append(rs, b)
		recs = append(recs, rr)
	}
	return rs, recs
}

// drainIdempotent retries the idempotent producers' unacked batches until
// each is acked (every fault is cleared by now).
func (s *sim) drainIdempotent() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	for range 100 {
		s.mu.Lock()
		left := 0
		for _, b := range s.batches {
			if s.prods[b.prod].idem && b.state != acked {
				left++
			}
		}
		s.mu.Unlock()
		if left == 0 {
			return
		}
		if s.node == nil {
			s.restart(false)
			continue
		}
		s.appendBurst()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
	}
}

// checkIdempotent: every batch of an idempotent producer is acked (zero
// losses; checkHistory already proved zero duplicates).
func (s *sim) checkIdempotent() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, b := range s.batches {
		if s.prods[b.prod].idem && b.state != acked {
			s.fatalf("idempotent batch %s (%d retries) never acked: state %d, %v", key, b.retries, b.state, b.err)
		}
	}
}
