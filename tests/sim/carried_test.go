package sim

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Carried tables (ADR 0062): a star writes a stream's dedupe table of
// acknowledged batches into its flights, and a successor trusts it. The
// invariant it relies on, checked here after every step against the sim's
// own record of acks and of the raw chain buckets (never the metastore's
// refs or the star's tables): every carried mark of a committed flight
// names a batch the star had acknowledged, in a committed slot below the
// carrying one, with the same seqs.
//
//   - the mark's producer is one of the sim's idempotent producers, and
//     the batch (producer, batch seq) is one the sim submitted to the
//     carrying segment's stream;
//   - when the sim holds the batch's ack (acked, or acked and then
//     dropped by loseAcks), the mark has its seqs;
//   - when a committed flight's batch table listed the batch (the sim
//     reads every valid copy of every slot as it appears), it is at a
//     lower (epoch, slot) than the carrying flight, with the same seqs;
//   - the mark lies below the table's acknowledged tail, itself at most
//     the carrying segment's first seq (the flight's parser checks this;
//     a flight that fails to parse is no valid copy).
//
// A mark whose batch the sim has no ack for and whose slot it never saw
// (acked and trimmed between two checks) is counted, not failed.
var carriedChecked, carriedUnverified atomic.Int64

// slotPos orders committed slots: epoch, then slot.
type slotPos struct{ epoch, slot uint64 }

func (a slotPos) less(b slotPos) bool {
	return a.epoch < b.epoch || (a.epoch == b.epoch && a.slot < b.slot)
}

// listedBatch is a batch a committed flight's batch table listed.
type listedBatch struct {
	at          slotPos
	first, last uint64
}

// carriedState is the checker's memory: the slots read so far and the
// batches their batch tables listed, by producer and batch seq.
type carriedState struct {
	read   map[string]bool
	listed map[[2]uint64]listedBatch // key: producer index, batch seq
}

// checkCarried checks every carried table of the committed slots that
// appeared since the last check. s.mu is held.
func (s *sim) checkCarried() {
	if s.carried.read == nil {
		s.carried = carriedState{read: map[string]bool{}, listed: map[[2]uint64]listedBatch{}}
	}
	pids := map[format.ProducerID]int{}
	for i, pr := range s.prods {
		if pr.idem {
			pids[pr.pid] = i
		}
	}
	type carrier struct {
		at  slotPos
		key string
		f   format.Flight
	}
	var carriers []carrier
	prefix := "chains/" + StarID + "/"
	for i, m := range s.w.Mems {
		for _, key := range m.Keys() {
			if s.carried.read[key] || !strings.HasPrefix(key, prefix) {
				continue
			}
			at, ok := parseSlotKey(strings.TrimPrefix(key, prefix))
			if !ok {
				continue
			}
			rec, err := s.dur.epoch(s.ctx, at.epoch)
			if err != nil {
				continue // not minted yet as the sim sees it: next check
			}
			if rec.State == metastore.EpochFenced && at.slot >= rec.Cut {
				s.carried.read[key] = true // past the cut: never committed
				continue
			}
			if ok, err := s.dur.validCopy(s.ctx, i, at.epoch, at.slot, rec.Nonce); err != nil || !ok {
				continue // not (yet) a valid copy in this bucket
			}
			body, err := m.Get(s.ctx, key, 0, -1)
			if err != nil {
				continue
			}
			f, err := format.ParseFlight(body)
			if err != nil {
				continue
			}
			s.carried.read[key] = true
			for _, b := range f.Batches {
				if pi, ok := pids[b.Producer]; ok {
					s.carried.listed[[2]uint64{uint64(pi), b.BatchSeq}] = listedBatch{at: at, first: b.FirstSeq, last: b.LastSeq()}
				}
			}
			if len(f.Carried) > 0 {
				carriers = append(carriers, carrier{at: at, key: key, f: f})
			}
		}
	}
	for _, c := range carriers {
		for _, ce := range c.f.Carried {
			seg := c.f.Entries[ce.Entry]
			if ce.Below > seg.FirstSeq {
				s.fatalf("%s: stream %s's carried table has tail %d past its segment's first seq %d", c.key, seg.Stream, ce.Below, seg.FirstSeq)
			}
			for _, m := range ce.Marks {
				carriedChecked.Add(1)
				if m.LastSeq >= ce.Below {
					s.fatalf("%s: carried mark %x/%d (seqs %d-%d) at or past the table's tail %d", c.key, m.Producer[:2], m.BatchSeq, m.FirstSeq, m.LastSeq, ce.Below)
				}
				pi, ok := pids[m.Producer]
				if !ok {
					s.fatalf("%s: carried mark of producer %x, none of the sim's idempotent producers", c.key, m.Producer)
				}
				b := s.batches[fmt.Sprintf("%d.%d", pi, m.BatchSeq)]
				if b == nil || s.w.IDs[b.stream] != seg.Stream {
					s.fatalf("%s: carried mark %d.%d on stream %s: the sim submitted no such batch to it", c.key, pi, m.BatchSeq, seg.Stream)
				}
				verified := false
				if a := ackOf(b); a != nil {
					if a.FirstSeq != m.FirstSeq || a.LastSeq != m.LastSeq {
						s.fatalf("%s: carried mark %d.%d says seqs %d-%d, the sim's ack %d-%d", c.key, pi, m.BatchSeq, m.FirstSeq, m.LastSeq, a.FirstSeq, a.LastSeq)
					}
					verified = true
				}
				if l, ok := s.carried.listed[[2]uint64{uint64(pi), m.BatchSeq}]; ok {
					if !l.at.less(c.at) || l.first != m.FirstSeq || l.last != m.LastSeq {
						s.fatalf("%s: carried mark %d.%d (seqs %d-%d) is not a batch of a committed slot below it: listed at %d/%d with seqs %d-%d",
							c.key, pi, m.BatchSeq, m.FirstSeq, m.LastSeq, l.at.epoch, l.at.slot, l.first, l.last)
					}
					verified = true
				}
				if !verified {
					carriedUnverified.Add(1)
				}
			}
		}
	}
}

// ackOf is the ack the sim holds for b: its ack, or the one it dropped
// (loseAcks); nil when it has none.
func ackOf(b *batchRec) *struct{ FirstSeq, LastSeq uint64 } {
	switch {
	case b.state == acked:
		return &struct{ FirstSeq, LastSeq uint64 }{b.ack.FirstSeq, b.ack.LastSeq}
	case b.lost != nil:
		return &struct{ FirstSeq, LastSeq uint64 }{b.lost.FirstSeq, b.lost.LastSeq}
	}
	return nil
}

// parseSlotKey parses "<epoch>/<slot>" of a slot key after its chain
// prefix (format.SlotKey).
func parseSlotKey(s string) (slotPos, bool) {
	e, sl, ok := strings.Cut(s, "/")
	if !ok {
		return slotPos{}, false
	}
	epoch, err1 := strconv.ParseUint(e, 10, 64)
	slot, err2 := strconv.ParseUint(sl, 10, 64)
	return slotPos{epoch, slot}, err1 == nil && err2 == nil
}
