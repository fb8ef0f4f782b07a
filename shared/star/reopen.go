package star

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// RecoverRefs is how many of a stream's last refs RecoverStream reads for
// producer marks: a successor remembers the producers whose batches are in
// them (each ref keeps each producer's latest batches; settled refs merge
// many flights).
const RecoverRefs = 16

// RefReader is what RecoverStream reads: a stream's refs.
type RefReader interface {
	LastRef(ctx context.Context, streamID string) (metastore.Ref, error)
	QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error)
}

// RecoverStream builds the StreamInfo that opens a stream on a star after
// a start or takeover, from durable artifacts alone: the tail (next seq,
// last timestamp) and the command state (fencing token, trim point) from
// the last ref, and the dedupe table from the
// producer marks of the last RecoverRefs refs (a takeover absorbs every
// committed slot of its predecessor into refs before it serves). Each
// recovered producer counts as seen at now: its idle expiry runs from the
// recovery (record timestamps are the client's, so not a clock). It reads
// the metastore, so it runs at open, never between admission and ack.
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
	for r := last; len(chain) < RecoverRefs && r.FirstSeq > 0; {
		got, err := refs.QueryRefs(ctx, id.String(), r.FirstSeq-1, 1)
		if err != nil {
			return info, fmt.Errorf("star: recover stream %s: ref before seq %d: %w", id, r.FirstSeq, err)
		}
		if len(got) == 0 || got[0].FirstSeq >= r.FirstSeq {
			break // trimmed below
		}
		r = got[0]
		chain = append(chain, r)
	}
	var marks []metastore.ProducerMark
	for i := len(chain) - 1; i >= 0; i-- {
		marks = append(marks, chain[i].Producers...)
	}
	info.Producers = producerStates(marks, now.UnixMilli())
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
