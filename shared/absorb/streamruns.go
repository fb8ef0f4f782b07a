package absorb

import (
	"context"
	"fmt"

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

// StreamRuns is stream id's entries in the live runs of head h,
// [h.Flushed, h.Settled) with merged runs below h.Merged (the walk of
// HeadRuns and VisitHeadRuns), run by run in walk order, the runs
// without any left out; every entry carries its command state. It is a
// per-stream lookup, as HeadRefs's (cmdAll): objects cached, or with
// room in the cache, are read whole; the others by range (a header, a
// block or two of the stream table, the stream's segments and marks,
// and a version 2 object's command table), up to RangedParallel at a
// time (design 014, "Lookups past the window budget"). It applies no
// marker: the caller (settle's flush of few streams) does, as a walk of
// the whole runs would.
func (w *IndexWindow) StreamRuns(ctx context.Context, c metastore.ChainID, h metastore.Head, id format.StreamID) ([]StreamRun, error) {
	sw := w.newStreamWalk(id, cmdAll)
	err := w.visit(ctx, c, h.Flushed, h.Settled, kindRun, h.Merged, sw.get, sw.add)
	if werr := sw.wait(); err == nil {
		err = werr
	}
	if err != nil {
		return nil, fmt.Errorf("chain %s: stream %s in the runs %s-%s: %w", c, id, h.Flushed, h.Settled, err)
	}
	var out []StreamRun
	for _, hit := range sw.hits {
		if len(hit.ents) > 0 {
			out = append(out, StreamRun{Run: hit.obj, Entries: hit.ents})
		}
	}
	return out, nil
}
