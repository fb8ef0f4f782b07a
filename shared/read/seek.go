package read

import (
	"context"
	"fmt"

	"github.com/strandlog/strand/shared/metastore"
)

// refQuerier is what seekTimestamp needs of the metastore.
type refQuerier interface {
	QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error)
}

// seekPage is the refs seekTimestamp's first query reads: a stream with
// fewer refs is decided by that one query.
const seekPage = 100

// seekTimestamp returns where a read of a stream from timestamp ts starts:
// one past the last seq of the last ref whose last timestamp is below ts
// (0 if there is none), clamped to tail. Nothing before it has a timestamp
// at or after ts, so the read, filtering by timestamp from there, misses
// nothing and skips every whole ref it can.
//
// It relies on a stream's timestamps being non-decreasing in seq order,
// which the star keeps under every timestamping mode (it clamps a record
// below its predecessor to the predecessor's timestamp, and a successor
// resumes from the recovered last timestamp), so whether a ref ends before
// ts is monotone in seq. That also makes a hole in the refs (trimmed, or a
// torn view while settle swaps refs) safe to skip when the ref after it
// ends before ts: the hole's records are no later than that ref's.
//
// Cost: one query of seekPage refs from seq 0 (enough for a stream whose
// refs all end before ts and reach its tail), then a binary search over [lo, tail) by seq, one query of
// one ref per step: at most 1 + ceil(log2(tail)) queries, where walking
// the index cost a query per seekPage refs. A step at seq m reads the
// first ref ending at or after m: if it ends before ts, lo moves past it;
// else (or if there is none: the rest is in the star's flight index) no
// ref ending at or after m ends before ts, and hi moves to m.
//
// The search is this one function over QueryRefs, so that a new ref index
// (per-stream refs at settle, a per-pass index) can keep it as is or
// replace it behind the same contract.
func seekTimestamp(ctx context.Context, q refQuerier, streamID string, tail uint64, ts int64) (uint64, error) {
	lo := uint64(0)
	refs, err := q.QueryRefs(ctx, streamID, 0, seekPage)
	if err != nil {
		return 0, fmt.Errorf("query refs from 0: %w", err)
	}
	for _, r := range refs {
		if r.LastTsMs >= ts {
			return min(lo, tail), nil
		}
		lo = r.LastSeq + 1
	}
	if len(refs) == 0 || lo >= tail {
		// No refs, or every seq below the tail ends before ts. A page
		// short of seekPage is not the end (DynamoDB cuts a page at 1 MB),
		// so anything else goes on to the search.
		return min(lo, tail), nil
	}
	hi := tail
	for lo < hi {
		mid := lo + (hi-lo)/2
		refs, err := q.QueryRefs(ctx, streamID, mid, 1)
		if err != nil {
			return 0, fmt.Errorf("query refs from %d: %w", mid, err)
		}
		if len(refs) == 0 || refs[0].LastTsMs >= ts {
			hi = mid
			continue
		}
		lo = refs[0].LastSeq + 1
	}
	return min(lo, tail), nil
}
