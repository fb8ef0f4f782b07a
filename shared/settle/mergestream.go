package settle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/passindex"
)

// A merge streams its input runs (issue 17, "The hourly step at
// 1,000,000 streams"). It held the group's runs decoded at once: Fanout
// x 144 bytes per entry, 1.6 GiB at 100,000 streams in each of 60 runs
// and about 16 GiB at 1,000,000, past the settle Lambda's 2 GiB. Each
// input run is now read by range (format's piece decoders, as the
// per-stream lookups past the window budget read: design 014, "Lookups
// past the window budget", "Integrity of a ranged read"), in chunks of
// mergeIndexChunk stream table entries with their segments and marks,
// one chunk read ahead; a version 2 run's command table is read whole
// once (it has no index of its own). So the merge holds per input run
// two chunks of its index and two of its packs, the merged run it
// writes and one pack.

// mergeIndexChunk is how many stream table entries of an input run a
// merge reads at once (a variable for tests: small chunks split a
// stream's marker from its packed entry).
var mergeIndexChunk uint32 = 4096

// groupRun is one input run of a merge: its key's cursor, its end and
// its header (zero when the walk found the run cached: openRun reads it).
type groupRun struct {
	epoch, first, end uint64
	digest            uint32 // its plan's (its packs' keys)
	h                 format.PassHeader
}

// mergeGroup is the group a merge from a takes: the level-1 runs from a
// (at a, or at the next epoch's first run when a is an epoch's cut), at
// most fanout of a's epoch, walked by key up to `to` (the settled
// cursor) as passindex.Window walks runs, reading each run's header
// only (nothing for a run the window's cache holds); later reports that a run of a later epoch follows them (so a
// group of fewer than fanout is complete).
func (s *Settler) mergeGroup(ctx context.Context, c metastore.ChainID, a, to metastore.Cursor, fanout int) (group []groupRun, later bool, err error) {
	for at := a; at.Less(to); {
		if at.Epoch < to.Epoch {
			cut, exists, err := passindex.EpochCut(ctx, s.Meta, c, at.Epoch)
			if err != nil {
				return nil, false, err
			}
			if !exists || at.Slot >= cut {
				at = metastore.Cursor{Epoch: at.Epoch + 1}
				continue
			}
		}
		if len(group) > 0 && (len(group) == fanout || at.Epoch != group[0].epoch) {
			return group, at.Epoch != group[0].epoch, nil
		}
		if r := s.window.CachedRun(c, at); r != nil {
			// Cached: its place without a GET (openRun reads its header).
			group = append(group, groupRun{epoch: r.Epoch, first: r.FirstSlot, end: r.EndSlot, digest: r.Digest})
			at.Slot = r.EndSlot
			continue
		}
		key := format.RunIndexKey(c.Star, c.Class.String(), at.Epoch, at.Slot)
		// Through the window's bucket, as the walk it replaces.
		hb, err := s.window.Bucket.Get(ctx, key, 0, format.PassHeaderSize)
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, false, fmt.Errorf("run %s: %w: %w", key, passindex.ErrWindow, err)
		}
		if err != nil {
			return nil, false, fmt.Errorf("read run %s: %w", key, err)
		}
		h, err := format.ParsePassHeader(hb)
		if err != nil {
			return nil, false, fmt.Errorf("run %s: %w", key, err)
		}
		if h.Epoch != at.Epoch || h.FirstSlot != at.Slot {
			return nil, false, fmt.Errorf("run %s says %d/%d: %w", key, h.Epoch, h.FirstSlot, ErrMismatch)
		}
		group = append(group, groupRun{epoch: h.Epoch, first: h.FirstSlot, end: h.EndSlot, digest: h.Digest, h: h})
		at.Slot = h.EndSlot
	}
	return group, false, nil
}

// runCursor reads one input run's entries in stream order, by range.
type runCursor struct {
	ctx     context.Context
	b       objstore.Bucket
	key     string
	h       format.PassHeader
	cmds    []format.CommandEntry // versions 2 and 3: the whole command table
	carried []format.CarriedEntry // version 3: the whole carried table (ADR 0062)
	next    uint32                // the next chunk's first entry
	buf     []format.PassStream   // the chunk in hand
	pos     int
	ahead   *indexChunk // the next chunk, being read
}

type indexChunk struct {
	done    chan struct{}
	streams []format.PassStream
	err     error
}

// openRun reads run g's command table, if any, and starts reading its
// first chunk.
func openRun(ctx context.Context, b objstore.Bucket, c metastore.ChainID, g groupRun) (*runCursor, error) {
	key := format.RunIndexKey(c.Star, c.Class.String(), g.epoch, g.first)
	h := g.h
	if h.Version == 0 {
		hb, err := b.Get(ctx, key, 0, format.PassHeaderSize)
		if err != nil {
			return nil, fmt.Errorf("read run %s: %w", key, err)
		}
		if h, err = format.ParsePassHeader(hb); err != nil {
			return nil, fmt.Errorf("run %s: %w", key, err)
		}
		if h.Epoch != g.epoch || h.FirstSlot != g.first || h.EndSlot != g.end {
			return nil, fmt.Errorf("run %s says %d/%d-%d, cached as %d/%d-%d: %w", key, h.Epoch, h.FirstSlot, h.EndSlot, g.epoch, g.first, g.end, ErrMismatch)
		}
	}
	rc := &runCursor{ctx: ctx, b: b, key: key, h: h}
	if h.Version >= format.PassIndexVersionCommands {
		tail, err := b.Get(ctx, key, h.CommandsAt(), -1)
		if err != nil {
			return nil, fmt.Errorf("read run %s's command table: %w", key, err)
		}
		if rc.cmds, rc.carried, err = format.ParsePassTail(h, tail); err != nil {
			return nil, fmt.Errorf("run %s: %w", key, err)
		}
	}
	rc.ahead = rc.read()
	return rc, nil
}

// read starts reading the chunk at rc.next.
func (rc *runCursor) read() *indexChunk {
	ch := &indexChunk{done: make(chan struct{})}
	first := rc.next
	n := min(mergeIndexChunk, rc.h.Streams-first)
	rc.next += n
	if n == 0 {
		close(ch.done)
		return ch
	}
	go func() {
		defer close(ch.done)
		ch.streams, ch.err = rc.chunk(rc.ctx, first, n)
		if ch.err != nil {
			ch.err = fmt.Errorf("run %s entries %d+%d: %w", rc.key, first, n, ch.err)
		}
	}()
	return ch
}

// chunk reads and checks entries [first, first+n) with their segments,
// marks and command state.
func (rc *runCursor) chunk(ctx context.Context, first, n uint32) ([]format.PassStream, error) {
	h := rc.h
	eb, err := rc.b.Get(ctx, rc.key, h.EntryAt(first), int64(n)*format.PassEntrySize)
	if err != nil {
		return nil, err
	}
	ents, err := format.ParsePassEntries(h, first, eb)
	if err != nil {
		return nil, err
	}
	if first == 0 && (ents[0].SegFirst != 0 || ents[0].MarkFirst != 0) {
		return nil, fmt.Errorf("entry 0 at segment %d, mark %d: %w", ents[0].SegFirst, ents[0].MarkFirst, format.ErrBounds)
	}
	last := ents[len(ents)-1]
	segLo, segHi := ents[0].SegFirst, last.SegFirst+last.SegN
	markLo, markHi := ents[0].MarkFirst, last.MarkFirst+last.MarkN
	var segs []format.PassSegment
	var marks []format.PassMark
	if segHi > segLo {
		sb, err := rc.b.Get(ctx, rc.key, h.SegmentAt(segLo), int64(segHi-segLo)*format.PassSegmentSize)
		if err != nil {
			return nil, err
		}
		if segs, err = format.ParsePassSegments(sb); err != nil {
			return nil, err
		}
	}
	if markHi > markLo {
		mb, err := rc.b.Get(ctx, rc.key, h.MarkAt(markLo), int64(markHi-markLo)*format.PassMarkSize)
		if err != nil {
			return nil, err
		}
		if marks, err = format.ParsePassMarks(mb); err != nil {
			return nil, err
		}
	}
	// The command entries of this chunk's entries (sorted by entry).
	lo, _ := slices.BinarySearchFunc(rc.cmds, first, func(e format.CommandEntry, t uint32) int { return int(e.Entry) - int(t) })
	hi, _ := slices.BinarySearchFunc(rc.cmds, first+n, func(e format.CommandEntry, t uint32) int { return int(e.Entry) - int(t) })
	clo, _ := slices.BinarySearchFunc(rc.carried, first, func(e format.CarriedEntry, t uint32) int { return int(e.Entry) - int(t) })
	chi, _ := slices.BinarySearchFunc(rc.carried, first+n, func(e format.CarriedEntry, t uint32) int { return int(e.Entry) - int(t) })
	return format.AssemblePassStreamsCarried(h, ents, segs, marks, rc.cmds[lo:hi], rc.carried[clo:chi])
}

// peek is the next entry, or nil at the run's end.
func (rc *runCursor) peek() (*format.PassStream, error) {
	for rc.pos == len(rc.buf) {
		if rc.ahead == nil {
			return nil, nil
		}
		ch := rc.ahead
		<-ch.done
		if ch.err != nil {
			rc.ahead = nil
			return nil, ch.err
		}
		if len(ch.streams) == 0 {
			rc.ahead, rc.buf, rc.pos = nil, nil, 0
			return nil, nil
		}
		rc.buf, rc.pos = ch.streams, 0
		rc.ahead = rc.read()
	}
	return &rc.buf[rc.pos], nil
}

// close waits for the read ahead, if any.
func (rc *runCursor) close() {
	if rc.ahead != nil {
		<-rc.ahead.done
		rc.ahead = nil
	}
}
