package star

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// RecoverRefs is how many of a stream's last refs RecoverStream reads for
// producer marks when none of them has a carried table (ADR 0062): a
// successor remembers the producers whose batches are in them (each ref
// keeps each producer's latest batches; settled refs merge many flights).
// The newest carried table is in the last CarryEvery <= RecoverRefs parts
// of a stream whose star remembered a producer.
const RecoverRefs = 16

// MaxRecoverRefs bounds the refs RecoverStream reads: past the newest
// carried table, back to the part holding its acknowledged tail (the
// stream's flights in flight when it was taken: at most
// --s3-parallel-uploads, so CarryEvery + that + 1 parts).
const MaxRecoverRefs = 256

// MaxParallelUploads bounds a class's pipeline window (Config.Validate):
// the most flights in flight at a carrying cut for which RecoverStream,
// reading at most MaxRecoverRefs parts, still reaches the newest carried
// table's tail when every flight is its own part and the table is
// CarryEvery-1 parts from the end
// (TestReviewRecoverCoversEveryAcceptedWindow).
const MaxParallelUploads = MaxRecoverRefs - CarryEvery

// RefReader is what RecoverStream reads: a stream's refs, its last one
// and pages of those before a seq, newest first (metastore.Store's
// LastRef and RefsBefore; passindex.StreamRefs).
type RefReader interface {
	LastRef(ctx context.Context, streamID string) (metastore.Ref, error)
	RefsBefore(ctx context.Context, streamID string, beforeSeq uint64, limit int) ([]metastore.Ref, error)
}

// RecoverStream builds the StreamInfo that opens a stream on a star after
// a start or takeover, from durable artifacts alone: the tail (next seq,
// last timestamp) and the command state (fencing token, trim point) from
// the last ref, and the dedupe table from producer marks (a takeover
// absorbs every committed slot of its predecessor into refs before it
// serves): the union, by (producer, batch seq), of the newest carried
// table among the last RecoverRefs refs and the own marks of every ref
// from its acknowledged tail on (ADR 0062), with the carried tables and
// own marks of every other ref read; without a carried table, the own
// marks of the last RecoverRefs refs. The union is bounded as a ref's
// marks (metastore.TrimMarks). Each
// recovered producer counts as seen at now: its idle expiry runs from the
// recovery (record timestamps are the client's, so not a clock). It reads
// the metastore, so it runs at open, never between admission and ack:
// LastRef, then the refs before it in pages (RefsBefore: RecoverRefs-1
// refs, then pages twice as long, up to MaxRecoverRefs in all), so an
// open costs one or two Queries, at most 6 (more if DynamoDB's 1 MB cuts
// them), not one per ref, and reads few refs past the ones it needs (ADR
// 0075).
func RecoverStream(ctx context.Context, refs RefReader, id format.StreamID, class metastore.Class, now time.Time) (StreamInfo, error) {
	info := StreamInfo{ID: id, Class: class}
	last, err := refs.LastRef(ctx, id.String())
	if errors.Is(err, metastore.ErrNotFound) {
		return info, nil
	}
	if err != nil {
		return info, fmt.Errorf("star: recover stream %s: last ref: %w", id, err)
	}
	info.Next, info.LastTsMs = last.LastSeq+1, last.LastTsMs
	if last.Commands != nil {
		c := *last.Commands
		info.Commands = &c
	}
	chain := []metastore.Ref{last} // newest first
	var carried *metastore.Ref     // the newest ref with a carried table
	more := func(r metastore.Ref) bool {
		if carried == nil && len(r.Carried) > 0 {
			carried = &r
		}
		switch {
		case len(chain) >= MaxRecoverRefs:
			return false
		case carried != nil:
			return r.FirstSeq > carried.CarriedBelow // back to its tail
		default:
			return len(chain) < RecoverRefs
		}
	}
	var page []metastore.Ref // older refs read, newest first
	limit := RecoverRefs - 1 // the first page; each next one twice as long
	for r := last; more(r) && r.FirstSeq > 0; {
		if len(page) == 0 {
			limit = min(limit, MaxRecoverRefs-len(chain))
			got, err := refs.RefsBefore(ctx, id.String(), r.FirstSeq, limit)
			limit *= 2
			if err != nil {
				return info, fmt.Errorf("star: recover stream %s: refs before seq %d: %w", id, r.FirstSeq, err)
			}
			if len(got) == 0 {
				break // trimmed below
			}
			page = got
		}
		p := page[0]
		page = page[1:]
		if p.FirstSeq >= r.FirstSeq {
			continue // a window part and the ref it was flushed to: one range twice
		}
		if p.LastSeq+1 < r.FirstSeq {
			// A window part a ref starting before it covers (a flush
			// raced the read) is skipped; the ref may be on a later
			// page, so pages are read on until one covers r's start or
			// none is left: only then is it a hole (trimmed below).
			covers := func(q metastore.Ref) bool { return q.LastSeq+1 >= r.FirstSeq }
			for !slices.ContainsFunc(page, covers) && len(chain)+len(page) < MaxRecoverRefs {
				oldest := p.FirstSeq
				if len(page) > 0 {
					oldest = page[len(page)-1].FirstSeq
				}
				got, err := refs.RefsBefore(ctx, id.String(), oldest, max(min(limit, MaxRecoverRefs-len(chain)-len(page)), 1))
				if err != nil {
					return info, fmt.Errorf("star: recover stream %s: refs before seq %d: %w", id, oldest, err)
				}
				if len(got) == 0 {
					break
				}
				page = append(page, got...)
			}
			if slices.ContainsFunc(page, covers) {
				continue
			}
			break // a hole before r (trimmed below)
		}
		r = p
		chain = append(chain, r)
	}
	lists := make([][]metastore.ProducerMark, 0, 2*len(chain))
	for i := len(chain) - 1; i >= 0; i-- {
		lists = append(lists, chain[i].Carried, chain[i].Producers)
	}
	info.Producers = producerStates(metastore.UnionMarks(lists...), now.UnixMilli())
	return info, nil
}

// producerStates groups marks (in seq order) by producer, each producer's
// batches in seq order, the latest MaxMarksPerProducer kept.
func producerStates(marks []metastore.ProducerMark, nowMs int64) []ProducerState {
	idx := map[format.ProducerID]int{}
	var out []ProducerState
	for _, m := range metastore.TrimMarks(marks) {
		i, ok := idx[m.Producer]
		if !ok {
			i = len(out)
			idx[m.Producer] = i
			out = append(out, ProducerState{ID: m.Producer, LastMs: nowMs})
		}
		out[i].Batches = append(out[i].Batches, BatchMark{BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
	}
	return out
}
