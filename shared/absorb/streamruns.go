package absorb

import (
	"context"
	"errors"
	"fmt"
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
// runs without any left out; every entry carries its command state. Each
// stream's is a per-stream lookup, as HeadRefs's (cmdAll): objects
// cached, or with room in the cache, are read whole; the others by range
// (a header, a block or two of the stream table, the stream's segments
// and marks, and a version 2 object's command table), up to
// RangedParallel at a time per stream, `parallel` streams at a time
// (below 1: one). Unlike HeadRefs's, a lookup reads the header of an
// object it knows no size of before it fetches it whole (a cold window
// guesses small objects, and a run at many streams is tens of MB); and
// the lookups share the command tables they read by range (each read
// once, while the tables held stay within a quarter of the window's
// budget). It applies no marker: the caller (settle's flush of few
// streams) does, as a walk of the whole runs would.
func (w *IndexWindow) StreamRuns(ctx context.Context, c metastore.ChainID, heads []metastore.Head, ids []format.StreamID, parallel int) ([][]StreamRun, error) {
	if len(heads) != len(ids) {
		return nil, fmt.Errorf("chain %s: %d heads for %d streams: %w", c, len(heads), len(ids), metastore.ErrInvalid)
	}
	tables := &cmdTables{m: map[string]*cmdTable{}, max: w.budget() / 4}
	out := make([][]StreamRun, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i, id := range ids {
		h := heads[i]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sw := w.newStreamWalk(id, cmdAll)
			sw.headerFirst, sw.tables = true, tables
			err := w.visit(ctx, c, h.Flushed, h.Settled, kindRun, h.Merged, sw.get, sw.add)
			if werr := sw.wait(); err == nil {
				err = werr
			}
			if err != nil {
				errs[i] = fmt.Errorf("chain %s: stream %s in the runs %s-%s: %w", c, id, h.Flushed, h.Settled, err)
				return
			}
			for _, hit := range sw.hits {
				if len(hit.ents) > 0 {
					out[i] = append(out[i], StreamRun{Run: hit.obj, Entries: hit.ents})
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// cmdTables shares the command tables of version 2 objects that the
// per-stream lookups of one StreamRuns call read by range: each table is
// read once, not once per stream, while the tables held stay within
// max bytes (encoded); past that a lookup reads its own. A nil
// *cmdTables shares nothing.
type cmdTables struct {
	mu    sync.Mutex
	m     map[string]*cmdTable
	bytes int64
	max   int64
}

type cmdTable struct {
	done chan struct{}
	cmds []format.CommandEntry
	err  error
	kept bool // within max: later lookups use cmds
}

// get returns the command table of the object at key (header h): the
// shared one when a lookup read it (waiting for a read in flight), else
// read by range and parsed.
func (t *cmdTables) get(ctx context.Context, w *IndexWindow, key string, h format.PassHeader) ([]format.CommandEntry, error) {
	read := func() ([]format.CommandEntry, int, error) {
		b, err := w.readRange(ctx, key, h.CommandsAt(), -1)
		if err != nil {
			return nil, 0, err
		}
		cmds, err := format.ParsePassCommandTail(h, b)
		return cmds, len(b), err
	}
	if t == nil {
		cmds, _, err := read()
		return cmds, err
	}
	t.mu.Lock()
	if e := t.m[key]; e != nil {
		t.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.kept {
			return e.cmds, nil
		}
		cmds, _, err := read()
		return cmds, err
	}
	e := &cmdTable{done: make(chan struct{})}
	t.m[key] = e
	t.mu.Unlock()
	cmds, n, err := read()
	t.mu.Lock()
	if err == nil && t.bytes+int64(n) <= t.max {
		t.bytes += int64(n)
		e.cmds, e.kept = cmds, true
	}
	t.mu.Unlock()
	close(e.done)
	return cmds, err
}
