package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// errLostAck is the state of a batch whose ack the sim dropped (loseAcks).
var errLostAck = errors.New("sim: ack lost in the network")

// loseAcksOf drops, as a network does just before a crash, the ack of
// one of the latest 8 batches (the latest, or one of the 7 before it) of
// about half of the idempotent producers, when incarnation n acked it:
// their producers retry it on the next incarnation, whose dedupe tables
// are rebuilt from the index (refs, pass indexes and runs: own marks and
// carried tables, ADR 0041, ADR 0062), and the retry must get the seqs the
// dropped ack had (retriedLostAck), never a second copy (checkHistory).
// The latest 8: the window a takeover keeps of each producer, however its
// parts were settled and merged. Only seeds with loseAcks draw from the
// seed's stream here.
func (s *sim) loseAcksOf(n *Node) {
	if !s.loseAcks {
		return
	}
	s.loseLatestAcks(n.Gen)
}

// loseLatestAcks is loseAcksOf for the batches incarnation gen acked, or
// for every incarnation's (gen -1).
func (s *sim) loseLatestAcks(gen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pi, pr := range s.prods {
		if !pr.idem || pr.next == 0 {
			continue
		}
		if s.rng.IntN(2) == 0 {
			continue
		}
		// The latest batch, or one of the 7 before it: the window (each
		// producer's latest 8) holds it across takeovers and merges, the
		// carried tables (ADR 0062) however many parts ago it committed.
		idx := pr.next - 1 - s.rng.IntN(min(pr.next, star.DefaultDedupeWindow))
		b := s.batches[fmt.Sprintf("%d.%d", pi, idx)]
		if b == nil || b.state != acked || (gen >= 0 && b.gen != gen) {
			continue
		}
		a := b.ack
		// gen -1: as a retried batch (outstanding), no incarnation's own.
		b.lost, b.state, b.err, b.gen = &a, unknown, errLostAck, -1
	}
}

// retriedLostAck checks a retried batch's ack against the one the sim
// dropped; a mismatch is recorded for check (this runs on a workload
// goroutine). s.mu is held.
func (s *sim) retriedLostAck(b *batchRec) {
	if b.lost == nil {
		return
	}
	if b.ack.FirstSeq != b.lost.FirstSeq || b.ack.LastSeq != b.lost.LastSeq {
		s.lostAckErrs = append(s.lostAckErrs, fmt.Sprintf("batch %d.%d: acked at seqs %d-%d, its retry after a takeover at %d-%d (%d retries)",
			b.prod, b.idx, b.lost.FirstSeq, b.lost.LastSeq, b.ack.FirstSeq, b.ack.LastSeq, b.retries))
	}
	b.lost = nil
	totals.lostAcks.Add(1)
}

// checkLostAcks: every retry of a batch whose ack was lost got the
// original ack's seqs (exactly-once across takeovers, ADR 0041). s.mu is
// held.
func (s *sim) checkLostAcks() {
	if len(s.lostAckErrs) > 0 {
		s.fatalf("a retry of an acknowledged batch got other seqs: %s", strings.Join(s.lostAckErrs, "; "))
	}
}

// retryFailed is the state of a batch whose submission failed definitely:
// failed, unless it is a retry (gen -1, outstanding), whose original may
// have been committed (its outcome was unknown, or its ack lost): then
// the failure says nothing about the original, and it stays unknown.
func retryFailed(b *batchRec) int {
	if b.gen == -1 {
		return unknown
	}
	return failed
}

// mergeTakeover is the workload of retries after merges (issue 30 item
// 3): about half of the idempotent producers lose the ack of one of their
// latest 8 batches, whichever incarnation acked it (it may be many steps
// old), the star's releases are absorbed, settle copies with a
// production flush (World.HoldingSettler: nothing flushed for an hour)
// run until their steps have nothing left (the runs merged: those
// batches' producer marks now live in merged entries, not in refs), and a new incarnation takes over, rebuilding its dedupe
// tables from the window. The retries must get their original acks
// (retriedLostAck) and never a second copy (checkHistory): a merge that
// drops producer marks (the mutant settle-merge-drops-marks) fails here.
// Not in forgetful seeds: their star forgets producers by design.
func (s *sim) mergeTakeover() {
	if s.forgetful {
		s.restart(false)
		return
	}
	s.loseLatestAcks(-1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if s.node != nil { // what the star released, absorbed for settle
		_ = s.w.Absorber().AbsorbTo(ctx, Chain, s.node.Star.Released(Chain)) // faults may stop it: fine
	}
	for range 4 {
		if _, err := s.w.HoldingSettler().Run(ctx, Chain); err != nil {
			break // faults: the takeover goes on, as after a failed run
		}
	}
	cancel()
	s.restart(false)
}
