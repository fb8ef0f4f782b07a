package passindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
)

// Command state by range (design 014, "The command index"). A per-stream
// lookup that reads a version 2 run or merged run by range and needs
// command state reads it through the run's command index (its sidecar at
// format.CommandIndexKey, written by settle before the run) when the run
// has a usable one and that is cheaper: the index's header (once per run
// and process, with the run's CRC read from its end to bind the two), one
// block of the index per 1,024 streams of the stream table, then exactly
// the stream's command entry in the run. Without a usable index (a run an
// earlier build wrote, a pass index, an index of another plan of the run
// or a corrupt one: refused, counted) it reads the run's whole command
// table, as before: both give the state the whole object's decoding
// gives (TestRangedCommandsEqualTable).

// CommandIndexMinTable is the least command table (bytes) a lookup of
// one stream reads through a command index rather than whole (a block and
// an entry, RangedBlockBytes each: Window.CommandIndexGetBytes's
// default): settle writes no index for a run whose
// table is at most this.
const CommandIndexMinTable = 2 * RangedBlockBytes

// cmdxGetBytes is Window.CommandIndexGetBytes resolved.
func (w *Window) cmdxGetBytes() int64 {
	switch {
	case w.CommandIndexGetBytes == 0:
		return RangedBlockBytes
	case w.CommandIndexGetBytes < 0:
		return 0
	}
	return w.CommandIndexGetBytes
}

// cmdxState is what a cached header knows of its run's command index.
type cmdxState struct {
	known    bool // looked for
	usable   bool // present, its header valid (h)
	verified bool // bound to the run: its CRC and size checked
	h        format.CommandIndexHeader
}

func (d *rangedDir) cmdx() cmdxState {
	if d == nil {
		return cmdxState{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cx
}

func (d *rangedDir) setCmdx(s cmdxState) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cx = s
}

// rangedTail returns the command state and the carried tables (ADR 0062)
// of the stream table entries idxs (ascending, distinct) of the version 3
// object at key (header h), read from its tail (the command and carried
// tables) whole; nothing for other versions. An entry without state or
// table is absent. The
// marks' seqs are checked against their entries when assembled
// (format.AssemblePassStreamsCarried).
func (w *Window) rangedTail(ctx context.Context, key string, h format.PassHeader, idxs []uint32) (map[uint32]format.StreamCommands, map[uint32]format.CarriedEntry, error) {
	if h.Version != format.PassIndexVersionCarried || len(idxs) == 0 {
		return nil, nil, nil
	}
	b, err := w.readRange(ctx, key, h.CommandsAt(), -1)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: carried table: %w", key, err)
	}
	cmds, carried, err := format.ParsePassTail(h, b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", key, err)
	}
	outCmds, out := map[uint32]format.StreamCommands{}, map[uint32]format.CarriedEntry{}
	for _, c := range cmds {
		if _, ok := slices.BinarySearch(idxs, c.Entry); ok {
			outCmds[c.Entry] = c.Commands
		}
	}
	for _, c := range carried {
		if _, ok := slices.BinarySearch(idxs, c.Entry); ok {
			out[c.Entry] = c
		}
	}
	return outCmds, out, nil
}

// rangedCommands returns the command state of the stream table entries
// idxs (ascending, distinct) of the version 2 or 3 object at key (header h):
// through its command index when index is set (a run or merged run) and
// it has a usable one worth reading, else from its whole command table.
// An entry without state is absent from the map. dir caches what is
// learnt of the index (nil: nothing cached).
func (w *Window) rangedCommands(ctx context.Context, key string, h format.PassHeader, dir *rangedDir, index bool, idxs []uint32) (map[uint32]format.StreamCommands, error) {
	if h.Version < format.PassIndexVersionCommands || len(idxs) == 0 {
		return nil, nil
	}
	if index && h.Version == format.PassIndexVersionCommands { // a version 3 object has no command index
		got, ok, err := w.viaCommandIndex(ctx, key, h, dir, idxs)
		if err != nil || ok {
			return got, err
		}
	}
	b, err := w.readRange(ctx, key, h.CommandsAt(), -1)
	if err != nil {
		return nil, fmt.Errorf("%s: command table: %w", key, err)
	}
	cmds, err := format.ParsePassCommandTail(h, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	w.mu.Lock()
	w.cmdTables++
	w.mu.Unlock()
	out := map[uint32]format.StreamCommands{}
	for _, c := range cmds {
		if _, ok := slices.BinarySearch(idxs, c.Entry); ok {
			out[c.Entry] = c.Commands
		}
	}
	return out, nil
}

// viaCommandIndex is rangedCommands through the command index; ok false
// (and no error): no usable index, or the table is cheaper (read the
// table instead). An index that is absent, of another run or corrupt is
// not usable (and remembered in dir); an entry of the run that the bound
// index locates and that does not decode is an error.
func (w *Window) viaCommandIndex(ctx context.Context, key string, h format.PassHeader, dir *rangedDir, idxs []uint32) (map[uint32]format.StreamCommands, bool, error) {
	ck := format.CommandIndexKey(key)
	st := dir.cmdx()
	if st.known && !st.usable {
		return nil, false, nil
	}
	if !st.known && 4+int64(h.Streams)*int64(format.MaxCommandEntryBytes) <= 2*w.cmdxGetBytes() {
		// The table is at most what one stream's lookup through an
		// index would be worth (settle writes none for it at the
		// default): read it whole without looking for an index.
		return nil, false, nil
	}
	refuse := func(err error) (map[uint32]format.StreamCommands, bool, error) {
		if ctx.Err() != nil {
			return nil, false, fmt.Errorf("%s: %w", ck, ctx.Err())
		}
		missing, refused := errors.Is(err, objstore.ErrNotFound), formatError(err)
		w.mu.Lock()
		switch {
		case missing:
			w.cmdxMissing++
		case refused:
			w.cmdxRefused++
		}
		w.mu.Unlock()
		if missing || refused {
			dir.setCmdx(cmdxState{known: true}) // not transient: remembered
		}
		return nil, false, nil // a failed GET: this lookup reads the table
	}
	if !st.known {
		b, err := w.readRange(ctx, ck, 0, format.CommandIndexHeaderSize)
		if err != nil {
			return refuse(err)
		}
		ch, err := format.ParseCommandIndexHeader(b)
		if err != nil {
			return refuse(err)
		}
		if !ch.Of(h) {
			return refuse(fmt.Errorf("%s: of another run: %w", ck, format.ErrMalformed))
		}
		st = cmdxState{known: true, usable: true, h: ch}
		dir.setCmdx(st)
	}
	var blocks []uint32
	for _, i := range idxs {
		if b := i / format.CommandIndexBlock; len(blocks) == 0 || blocks[len(blocks)-1] != b {
			blocks = append(blocks, b)
		}
	}
	if st.h.TableBytes() <= int64(len(blocks)+len(idxs))*w.cmdxGetBytes() {
		return nil, false, nil // the table in one GET is cheaper
	}
	// The blocks, and the run's CRC if not checked yet, in parallel.
	cbs := make([]format.CommandBlock, len(blocks))
	errs := make([]error, len(blocks))
	var bindErr, runErr error
	var wg sync.WaitGroup
	for k, blk := range blocks {
		wg.Go(func() {
			off, n := format.CommandIndexBlockAt(h, blk)
			b, err := w.readRange(ctx, ck, off, n)
			if err == nil {
				cbs[k], err = format.ParseCommandIndexBlock(st.h, blk, b)
			}
			errs[k] = err
		})
	}
	if !st.verified {
		wg.Go(func() {
			tail, err := w.readRange(ctx, key, st.h.RunSize-4, -1)
			switch {
			case errors.Is(err, objstore.ErrNotFound): // the run is gone: the lookup's error
				runErr = fmt.Errorf("%s: %w", key, err)
			case err != nil: // a run shorter than the index says: another run
				bindErr = err
			default:
				bindErr = format.CheckCommandIndexRun(st.h, h, tail)
			}
		})
	}
	wg.Wait()
	if runErr != nil {
		return nil, false, runErr
	}
	if bindErr != nil {
		return refuse(bindErr)
	}
	if !st.verified {
		st.verified = true
		dir.setCmdx(st)
	}
	if err := errors.Join(errs...); err != nil {
		return refuse(err)
	}
	// The entries, in parallel.
	type found struct {
		idx uint32
		c   format.StreamCommands
		err error
	}
	var got []*found
	k := 0
	for _, i := range idxs {
		for cbs[k].First+format.CommandIndexBlock <= i {
			k++
		}
		off, size, ok := cbs[k].Entry(h, i)
		if !ok {
			continue
		}
		f := &found{idx: i}
		got = append(got, f)
		wg.Go(func() {
			b, err := w.readRange(ctx, key, off, size)
			if err == nil {
				f.c, err = format.ParseCommandEntry(h, i, b)
			}
			if err != nil {
				f.err = fmt.Errorf("%s: command entry of stream table entry %d at %d (%s): %w", key, i, off, ck, err)
			}
		})
	}
	wg.Wait()
	out := make(map[uint32]format.StreamCommands, len(got))
	for _, f := range got {
		if f.err != nil {
			return nil, true, f.err
		}
		out[f.idx] = f.c
	}
	w.mu.Lock()
	w.cmdxReads++
	w.mu.Unlock()
	return out, true, nil
}

// formatError reports whether err is a decoder's (a format sentinel).
func formatError(err error) bool {
	for _, e := range []error{format.ErrTruncated, format.ErrMagic, format.ErrVersion, format.ErrKind, format.ErrCRC, format.ErrBounds, format.ErrMalformed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
