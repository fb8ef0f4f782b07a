package read

import (
	"context"
	"sync"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Read-ahead of a session. A session reads its stream in batches of at
// most MaxBytes; without a cache, every batch re-fetched and re-decoded
// the whole location (segment) it started in, so a location of L bytes
// cost about L/MaxBytes GETs of L bytes each, and every GET's first byte
// was waited for in turn. The session's ahead keeps the decoded segments
// of the locations the current refs name next, fetched by up to
// AheadParallel ranged GETs at once and bounded by AheadBytes (a location
// larger than the bound is still fetched, alone). Only the locations of
// the refs the read is walking are kept: a location the read has passed,
// or that a later query no longer names (settle swapped the ref, trim
// dropped it), is forgotten; a failed fetch is forgotten too, so the
// read's retry (fromRefs) fetches afresh against the refs it re-queries.
//
// The hook is small on purpose: Session puts an ahead in its context,
// refsOnce gets its refs from queryRefs, calls plan with them and load
// for each location; without an ahead (Read) these query, fetch and
// decode as before.

// Read-ahead bounds per session. All the sessions of a Reader also share
// its Budget (budget.go), which bounds their sum.
// Each GET waits for its first byte (S3 Standard: about 30 ms, Express:
// 3 ms) and then streams at about 90 MB/s: a reader goes as fast as the
// bytes it keeps in flight, so the bounds are set for depth (16 x 4 MiB
// covers 30 ms of first byte at over 1 GB/s); the shared Budget keeps the
// sum over sessions bounded.
const (
	AheadParallel = 16
	AheadBytes    = 64 << 20
)

type aheadKey struct{}

type locKey struct {
	settled     bool
	key         string
	off, length int64
}

func keyOf(l metastore.Location) locKey {
	return locKey{l.Settled, l.Key, l.Offset, l.Length}
}

// fetched is one location's decoded segment, or the fetch in progress.
type fetched struct {
	done chan struct{}
	info format.SegmentInfo
	recs []format.Record
	err  error
	// charge is what it holds of the budget (0 once given back); finished:
	// the fetch ended. Both under ahead.mu.
	charge   int64
	finished bool
}

type ahead struct {
	r   *Reader
	st  metastore.Stream
	id  format.StreamID
	ctx context.Context
	bud *Budget

	mu       sync.Mutex
	waiting  bool // the read waits for budget: fetch nothing ahead
	have     map[locKey]*fetched
	order    []metastore.Location // the planned locations, in read order
	inflight int
	refs     []metastore.Ref // the last refs queried, while they serve
}

// withAhead gives the session's reads a read-ahead; stop cancels its
// fetches.
func (r *Reader) withAhead(ctx context.Context, st metastore.Stream, id format.StreamID) (context.Context, func()) {
	actx, cancel := context.WithCancel(ctx)
	a := &ahead{r: r, st: st, id: id, ctx: actx, bud: r.aheadBudget(), have: map[locKey]*fetched{}}
	return context.WithValue(ctx, aheadKey{}, a), func() {
		cancel()
		a.mu.Lock()
		a.dropAll()
		a.mu.Unlock()
	}
}

// aheadBudget is r.AheadBudget, or r's own default one.
func (r *Reader) aheadBudget() *Budget {
	if r.AheadBudget != nil {
		return r.AheadBudget
	}
	r.budgetOnce.Do(func() { r.budget = NewBudget(DefaultAheadBudget) })
	return r.budget
}

// drop forgets a location and gives back its charge, now if its fetch
// has ended, else when it ends (fetch). a.mu is held.
func (a *ahead) drop(k locKey, f *fetched) {
	if a.have[k] == f {
		delete(a.have, k)
	}
	if f.finished {
		a.release(f)
	}
}

func (a *ahead) dropAll() {
	for k, f := range a.have {
		a.drop(k, f)
	}
}

func (a *ahead) release(f *fetched) {
	if f.charge > 0 {
		a.bud.give(f.charge)
		f.charge = 0
	}
}

// start launches the fetch of l, charged c; prefetch: no read waits on
// it yet. a.mu is held.
func (a *ahead) start(l metastore.Location, c int64, prefetch bool) *fetched {
	f := &fetched{done: make(chan struct{}), charge: c}
	a.have[keyOf(l)] = f
	a.inflight++
	go a.fetch(l, f, prefetch)
	return f
}

func aheadOf(ctx context.Context) *ahead {
	a, _ := ctx.Value(aheadKey{}).(*ahead)
	return a
}

// upcoming lists refs' locations that hold seqs at or above from, in
// read order.
func upcoming(refs []metastore.Ref, from uint64) []metastore.Location {
	var out []metastore.Location
	for _, ref := range refs {
		if ref.LastSeq < from {
			continue
		}
		for li, loc := range ref.Locations {
			if li+1 < len(ref.Locations) {
				if next := ref.Locations[li+1].FirstSeq; next > 0 && next <= from {
					continue
				}
			}
			out = append(out, loc)
		}
	}
	return out
}

// plan is called with the refs a read walks from from: it forgets the
// locations they no longer name and starts fetches of the next ones.
func (a *ahead) plan(refs []metastore.Ref, from uint64) {
	if a == nil {
		return
	}
	locs := upcoming(refs, from)
	a.mu.Lock()
	defer a.mu.Unlock()
	keep := make(map[locKey]bool, len(locs))
	for _, l := range locs {
		keep[keyOf(l)] = true
	}
	for k, f := range a.have {
		if !keep[k] {
			a.drop(k, f) // an in-flight fetch finishes into nothing
		}
	}
	a.order = locs
	a.fill()
}

// fill starts fetches of the planned locations in order while the bounds
// allow: at most AheadParallel in flight, at most AheadBytes held or in
// flight (the first location always), and what the shared budget grants
// without waiting (the first location may use all of it, the others
// prefetchShare). A location the budget refuses is left to load, which
// waits for it. a.mu is held.
func (a *ahead) fill() {
	if a.waiting {
		return
	}
	var held int64
	for i, l := range a.order {
		k := keyOf(l)
		if _, ok := a.have[k]; ok {
			held += l.Length
			continue
		}
		if a.inflight >= AheadParallel || (i > 0 && held+l.Length > AheadBytes) {
			return
		}
		c, frac := a.bud.charge(l.Length), prefetchShare
		if i == 0 {
			frac = 1
		}
		if !a.bud.tryTake(c, frac) {
			return
		}
		held += l.Length
		a.start(l, c, i > 0)
	}
}

func (a *ahead) fetch(l metastore.Location, f *fetched, prefetch bool) {
	f.info, f.recs, f.err = a.r.decode(a.ctx, a.st, a.id, l, prefetch)
	a.mu.Lock()
	a.inflight--
	f.finished = true
	if f.err != nil {
		if a.have[keyOf(l)] == f {
			delete(a.have, keyOf(l)) // the retry fetches afresh
		}
		// The plan is stale (a location vanished, or the session ended):
		// fetch nothing more until the read re-queries and plans again.
		// (Refilling here re-launched the failed fetch at once, forever.)
		a.refs, a.order = nil, nil
	}
	if a.have[keyOf(l)] != f {
		a.release(f) // dropped while in flight, or failed
	}
	close(f.done)
	a.fill()
	a.mu.Unlock()
}

// load returns loc's decoded segment: from the session's read-ahead when
// there is one (waiting for its fetch), else fetched now. The ahead
// forgets a location at the first plan whose refs start past it.
func (r *Reader) load(ctx context.Context, st metastore.Stream, id format.StreamID, loc metastore.Location) (format.SegmentInfo, []format.Record, error) {
	a := aheadOf(ctx)
	if a == nil {
		return r.decode(ctx, st, id, loc, false)
	}
	k := keyOf(loc)
	a.mu.Lock()
	a.pass(k)
	f, ok := a.have[k]
	if c := a.bud.charge(loc.Length); !ok && a.bud.tryTake(c, 1) {
		// Not planned (or forgotten, or fill was at AheadParallel): fetch
		// it now, beside the others.
		f, ok = a.start(loc, c, false), true
	}
	if !ok {
		// The budget has no room: give back all this session holds (a
		// session that waits holds nothing) and wait for room for this one.
		a.dropAll()
		a.waiting = true
		a.mu.Unlock()
		c := a.bud.charge(loc.Length)
		err := a.bud.take(ctx, c)
		a.mu.Lock()
		a.waiting = false
		if err != nil {
			a.mu.Unlock()
			return format.SegmentInfo{}, nil, err
		}
		f = a.start(loc, c, false)
	}
	a.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return format.SegmentInfo{}, nil, ctx.Err()
	}
	return f.info, f.recs, f.err
}

// pass drops the planned locations before k, from the plan and from what
// is held: the read, which loads them in plan order, has passed them.
// a.mu is held.
func (a *ahead) pass(k locKey) {
	for i, l := range a.order {
		if keyOf(l) == k {
			for _, p := range a.order[:i] {
				if f, ok := a.have[keyOf(p)]; ok {
					a.drop(keyOf(p), f)
				}
			}
			a.order = a.order[i:] // or fill would fetch them again
			return
		}
	}
}

// forgetRefs drops the cached refs: the next query goes to the metastore.
func (a *ahead) forgetRefs() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.refs = nil
	a.mu.Unlock()
}

// queryRefs is refsOnce's query of the refs from from. A session's ahead
// answers from the refs it last queried while they still reach from, so a
// session queries the metastore once per page of refs, not once per
// batch. Refs only ever change by being replaced with refs over the same
// records (settle) or dropped (trim, retention): a cached ref whose data
// is gone fails its fetch, which drops the cache, and fromRefs' retry
// re-queries.
func (r *Reader) queryRefs(ctx context.Context, st metastore.Stream, from uint64, limit int) ([]metastore.Ref, error) {
	a := aheadOf(ctx)
	if a != nil {
		a.mu.Lock()
		refs := a.refs
		a.mu.Unlock()
		if len(refs) > 0 && refs[0].FirstSeq <= from {
			for i, ref := range refs {
				if ref.LastSeq >= from {
					if ref.FirstSeq <= from { // contiguous: else ask the metastore about the hole
						return refs[i:], nil
					}
					break
				}
			}
		}
	}
	refs, err := r.refsFrom(ctx, st, from, limit)
	if a != nil && err == nil {
		a.mu.Lock()
		a.refs = refs
		a.mu.Unlock()
	}
	return refs, err
}

// decode returns one location's decoded segment, from the Reader's
// segment cache or fetched (once for all the reads that want it
// meanwhile: cache.go); prefetch is the fetch's (segment).
func (r *Reader) decode(ctx context.Context, st metastore.Stream, id format.StreamID, loc metastore.Location, prefetch bool) (format.SegmentInfo, []format.Record, error) {
	return r.segmentCache().get(ctx, cacheKey{id, keyOf(loc)}, func(ctx context.Context) (format.SegmentInfo, []format.Record, error) {
		return r.segment(ctx, st, id, loc, prefetch)
	})
}
