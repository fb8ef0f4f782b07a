package passindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// StreamRun is one live run of a head with a stream's entries in it
// (StreamRuns).
type StreamRun struct {
	// Run is the run's epoch, slots and Merged (no streams): what RunRef
	// needs of it.
	Run *format.PassIndex
	// Entries are the stream's entries in the run, as PassIndex.FindAll
	// returns them (one, or a merged run's marker then packed entry),
	// their own copies, with their command state.
	Entries []format.PassStream
}

// StreamRuns is, for each stream ids[i], its entries in the live runs
// of head heads[i], [Flushed, Settled) with merged runs below Merged (the
// walk of HeadRuns and VisitHeadRuns), run by run in walk order, the
// runs without any left out; every entry carries its command state, as
// a whole run's does. Each stream's is a per-stream lookup, as
// HeadRefs's: objects cached, or with room in the cache, are read whole;
// the others by range (a header, a block or two of the stream table, the
// stream's segments and marks), up to RangedParallel at a time per
// stream, `parallel` streams at a time (below 1: one). Unlike HeadRefs's,
// a lookup reads the header of an object it knows no size of before it
// fetches it whole (a cold window guesses small objects, and a run at
// many streams is tens of MB); and the command state comes last, once
// per version 2 object read by range where a stream has a packed entry,
// for all the streams: through the run's command index (a block and an
// entry per stream: cmdindex.go) when it has a usable one and that reads
// less than its command table, else the table whole (with command state
// on most streams a table is about 30% of its run), RangedParallel
// objects at a time. It applies no marker: the caller (settle's
// flush of few streams) does, as a walk of the whole runs would.
func (w *Window) StreamRuns(ctx context.Context, c metastore.ChainID, heads []metastore.Head, ids []format.StreamID, parallel int) ([][]StreamRun, error) {
	if len(heads) != len(ids) {
		return nil, fmt.Errorf("chain %s: %d heads for %d streams: %w", c, len(heads), len(ids), metastore.ErrInvalid)
	}
	walks := make([]*streamWalk, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, id := range ids {
		h := heads[i]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// cmdNone: the ranged reads skip the command tables (read
			// below, once an object); whole objects' entries have theirs.
			sw := w.newStreamWalk(id, cmdNone)
			sw.headerFirst = true
			err := w.visit(ctx, c, h.Flushed, h.Settled, kindRun, h.Merged, sw.get, sw.add)
			if werr := sw.wait(); err == nil {
				err = werr
			}
			if err != nil {
				errs[i] = fmt.Errorf("chain %s: stream %s in the runs %s-%s: %w", c, id, h.Flushed, h.Settled, err)
				return
			}
			walks[i] = sw
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := w.hitCommands(ctx, walks); err != nil {
		return nil, fmt.Errorf("chain %s: %w", c, err)
	}
	out := make([][]StreamRun, len(ids))
	for i, sw := range walks {
		for _, hit := range sw.hits {
			if len(hit.ents) > 0 {
				out[i] = append(out[i], StreamRun{Run: hit.obj, Entries: hit.ents})
			}
		}
	}
	return out, nil
}

// hitCommands sets the command state of the packed entries the walks'
// ranged lookups found in version 2 objects: read by range once per
// object for all its entries (rangedCommands: through its command index,
// or its whole command table), its state given to the entries by their
// stream table index (as format.AssemblePassStreams and a whole object's
// decoding give it), RangedParallel objects at a time.
func (w *Window) hitCommands(ctx context.Context, walks []*streamWalk) error {
	byKey := map[string][]*streamHit{}
	var keys []string
	for _, sw := range walks {
		for _, hit := range sw.hits {
			if hit.idx == nil || hit.hdr.Version < format.PassIndexVersionCommands {
				continue // a whole object's (its entries have their state), or version 1
			}
			if !slices.ContainsFunc(hit.ents, func(s format.PassStream) bool { return !s.Marker() }) {
				continue // markers have no command state
			}
			if byKey[hit.key] == nil {
				keys = append(keys, hit.key)
			}
			byKey[hit.key] = append(byKey[hit.key], hit)
		}
	}
	n := w.RangedParallel
	if n <= 0 {
		n = DefaultRangedParallel
	}
	sem := make(chan struct{}, n)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		hits := byKey[key]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var idxs []uint32 // markers too: state given to one is refused
			for _, hit := range hits {
				idxs = append(idxs, hit.idx...)
			}
			slices.Sort(idxs)
			idxs = slices.Compact(idxs)
			got, err := w.rangedCommands(ctx, key, hits[0].hdr, hits[0].dir, hits[0].index, idxs)
			if err != nil {
				errs[i] = err
				return
			}
			for _, hit := range hits {
				for j := range hit.ents {
					s := &hit.ents[j]
					cs, ok := got[hit.idx[j]]
					if !ok {
						continue
					}
					if s.Marker() {
						errs[i] = fmt.Errorf("%s: marker of stream %s with command state: %w", key, s.Stream, format.ErrMalformed)
						return
					}
					if err := cs.Validate(); err != nil {
						errs[i] = fmt.Errorf("%s: stream %s: %v: %w", key, s.Stream, err, format.ErrMalformed)
						return
					}
					s.Commands = &cs
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
