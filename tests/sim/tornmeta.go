package sim

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/metastore"
)

// TornRefs is a metastore.Store wrapper whose QueryRefs reads the way the
// DynamoDB adapter's does, without a snapshot: first the last ref that
// starts before fromSeq (one backward Query), then the refs from fromSeq
// on, one item at a time in key order (the items of one Query, and of its
// pages, are each read-committed, not read together). Between any two of
// these reads it sleeps a seeded random while (virtual time inside a
// testing/synctest bubble), so a SwapRefs or DeleteRefs running
// concurrently commits in between: the reader sees what DynamoDB can show,
// such as 0..9 and 20..29 while 0..19 and 20..29 are stored. Every other
// call passes through.
type TornRefs struct {
	metastore.Store
	mu    sync.Mutex
	rng   *rand.Rand
	max   time.Duration
	reads atomic.Int64
	holes atomic.Int64
}

// NewTornRefs wraps s; each gap between two reads of one QueryRefs lasts up
// to maxGap.
func NewTornRefs(s metastore.Store, seed int64, maxGap time.Duration) *TornRefs {
	u := uint64(seed)
	return &TornRefs{Store: s, rng: rand.New(rand.NewPCG(u, u^0x7042)), max: maxGap}
}

// Reads is the number of item reads QueryRefs made.
func (t *TornRefs) Reads() int64 { return t.reads.Load() }

// Holes is the number of QueryRefs answers with a hole: between two refs,
// before the first (which starts after fromSeq), or no ref at all. Without
// retention (no ref is ever trimmed) and asked only for seqs that refs
// hold (as a reader does, below the index), each is a torn view.
func (t *TornRefs) Holes() int64 { return t.holes.Load() }

func (t *TornRefs) gap() {
	t.mu.Lock()
	d := time.Duration(t.rng.Int64N(int64(t.max) + 1))
	t.mu.Unlock()
	time.Sleep(d)
}

// QueryRefs implements metastore.Store, torn as described on TornRefs.
func (t *TornRefs) QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, err
	}
	var out []metastore.Ref
	if fromSeq > 0 {
		prev, err := t.Store.QueryRefs(ctx, streamID, fromSeq, 1)
		t.reads.Add(1)
		if err != nil {
			return nil, err
		}
		if len(prev) > 0 && prev[0].FirstSeq < fromSeq {
			out = append(out, prev[0])
		}
	}
	key := fromSeq // the next sort key the forward Query reads from
	// The forward Query's page stops at 1 MB, as DynamoDB's
	// (metastore.QueryPage; the ref before fromSeq does not count).
	for bytes := 0; len(out) < limit && bytes < metastore.MaxQueryBytes; {
		t.gap()
		page, err := t.Store.QueryRefs(ctx, streamID, key, 2)
		t.reads.Add(1)
		if err != nil {
			return nil, err
		}
		var next *metastore.Ref
		for i := range page {
			if page[i].FirstSeq >= key {
				next = &page[i]
				break
			}
		}
		if next == nil {
			break
		}
		out = append(out, *next)
		bytes += metastore.RefSize(*next)
		if next.FirstSeq == ^uint64(0) {
			break
		}
		key = next.FirstSeq + 1
	}
	hole := len(out) == 0
	for i := range out {
		if (i == 0 && out[0].FirstSeq > fromSeq) || (i > 0 && out[i].FirstSeq > out[i-1].LastSeq+1) {
			hole = true
		}
	}
	if hole {
		t.holes.Add(1)
	}
	return out, nil
}
