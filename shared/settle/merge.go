package settle

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// DefaultFanout is how many consecutive level-1 runs settle merges into
// one merged run (design 014, level 2): an hour of one-minute steps.
const DefaultFanout = 60

// mergeChunk bounds one ranged GET of a level-1 pack by a merge (and so
// the merge's input memory: Fanout x 2 x mergeChunk, with the read
// ahead). A variable for tests (small chunks exercise the read ahead).
var mergeChunk int64 = 1 << 20

// mergeAt is the merge of a step of runs (design 014, "Level 2 as
// built"), from h, the head the step makes (its settled and flushed
// cursors), before the step's commit: from a = the first level-1 run at
// or after max(flushed, merged) (the next epoch's first when that is an
// epoch's cut), when the level-1 runs from a hold a complete group
// (Fanout runs of a's epoch, or fewer ended by a run of a later epoch),
// it writes the merged run at a (or adopts the one stored there) and
// returns its end: the merged cursor the step commits (h.Merged when it
// merged nothing). A merged run is determined by its group (immutable
// runs), so racing copies write the same bytes, and one that never
// commits is garbage below the flushed cursor later (trim's).
func (s *Settler) mergeAt(ctx context.Context, c metastore.ChainID, h metastore.Head, res *Result) (metastore.Cursor, error) {
	fanout := orDefault(s.Fanout, DefaultFanout)
	if fanout < 0 {
		return h.Merged, nil
	}
	s.initWindow()
	// Runs start where the chain's indexed passes begin (design 014,
	// "Switching a live chain"): nothing to merge in refs mode.
	indexed, err := s.window.IndexedFrom(ctx, c, h)
	if err != nil || indexed.IsZero() {
		return h.Merged, err
	}
	a := h.Flushed
	for _, b := range []metastore.Cursor{h.Merged, indexed} {
		if a.Less(b) {
			a = b
		}
	}
	if !a.Less(h.Settled) {
		return h.Merged, nil
	}
	// The group: the level-1 runs from a, walked by key as the window
	// walks them (passindex.Window.Runs), by their headers only: the
	// merge reads them by range (mergestream.go), not through the cache.
	group, later, err := s.mergeGroup(ctx, c, a, h.Settled, fanout)
	if err != nil {
		return h.Merged, fmt.Errorf("merge: level-1 runs %s-%s: %w", a, h.Settled, err)
	}
	if len(group) == 0 || (len(group) < fanout && !later) {
		return h.Merged, nil // not complete yet
	}
	// The group starts at the first run from a: at a, or, when a is an
	// epoch's end (the cut), at the next epoch's first run.
	a = metastore.Cursor{Epoch: group[0].epoch, Slot: group[0].first}
	m, err := s.window.MergedRun(ctx, c, a)
	switch {
	case err == nil: // a copy wrote it: adopt it, whatever its end
	case !errors.Is(err, objstore.ErrNotFound):
		return h.Merged, fmt.Errorf("merge: %w", err)
	default:
		if m, err = s.makeMerged(ctx, c, group, res); err != nil {
			return h.Merged, fmt.Errorf("merge at %s: %w", a, err)
		}
	}
	end := metastore.Cursor{Epoch: m.Epoch, Slot: m.EndSlot}
	if !h.Merged.Less(end) {
		return h.Merged, nil
	}
	// The kept unflushed state follows (state.go): the head the step
	// commits has Merged at end.
	if cs := s.takeState(c, stateKey{flushed: h.Flushed, merged: h.Merged, settled: h.Settled}); cs != nil && cs.remapMerged(m) {
		s.putState(c, cs)
	}
	res.Merges++
	s.window.PruneMerged(c, end)
	return end, nil
}

// crcOf is a segment's stored CRC (its last 4 bytes).
func crcOf(seg []byte) uint32 {
	n := len(seg)
	return uint32(seg[n-4])<<24 | uint32(seg[n-3])<<16 | uint32(seg[n-2])<<8 | uint32(seg[n-1])
}

// packReader reads one level-1 run's segments from its packs in ranged
// GETs of up to mergeChunk: reads in pack order (a run packed in stream
// order, read in stream order) fetch each byte once. Each fetch starts
// the next chunk of the pack ahead (one in flight per input run, so a
// merge keeps up to Fanout GETs in flight while it copies).
type packReader struct {
	b      objstore.Bucket
	c      metastore.ChainID
	g      groupRun
	extent map[uint64]int64 // per pack read, its size (HEAD)
	slot   uint64
	lo     int64
	body   []byte
	ahead  *chunkFetch // the next chunk, being fetched
}

// chunkFetch is one ranged GET of a pack in flight.
type chunkFetch struct {
	slot uint64
	lo   int64
	done chan struct{}
	body []byte
	err  error
}

func newPackReader(b objstore.Bucket, c metastore.ChainID, g groupRun) *packReader {
	return &packReader{b: b, c: c, g: g, extent: map[uint64]int64{}}
}

func (p *packReader) key(slot uint64) string {
	return format.PackKey(p.c.Star, p.c.Class.String(), p.g.epoch, p.g.first, p.g.end, p.g.digest, slot)
}

// size is pack slot's size: a chunk never reads past it.
func (p *packReader) size(ctx context.Context, slot uint64) (int64, error) {
	if n, ok := p.extent[slot]; ok {
		return n, nil
	}
	n, err := p.b.Head(ctx, p.key(slot))
	if err != nil {
		return 0, fmt.Errorf("read pack %s: %w", p.key(slot), err)
	}
	p.extent[slot] = n
	return n, nil
}

// fetch starts a GET of [lo, lo+n) of pack slot.
func (p *packReader) fetch(ctx context.Context, slot uint64, lo, n int64) *chunkFetch {
	f := &chunkFetch{slot: slot, lo: lo, done: make(chan struct{})}
	key := p.key(slot)
	go func() {
		defer close(f.done)
		f.body, f.err = p.b.Get(ctx, key, lo, n)
		if f.err == nil && int64(len(f.body)) != n {
			f.err = fmt.Errorf("%d of %d bytes at %d: %w", len(f.body), n, lo, ErrMismatch)
		}
		if f.err != nil {
			f.err = fmt.Errorf("read pack %s: %w", key, f.err)
		}
	}()
	return f
}

// read returns segment g of the run (checked by the caller).
func (p *packReader) read(ctx context.Context, g format.PassSegment) ([]byte, error) {
	off, n := int64(g.Offset), int64(g.Length)
	extent, err := p.size(ctx, g.Slot)
	if err != nil {
		return nil, err
	}
	if off+n > extent {
		return nil, fmt.Errorf("read pack %s: segment at %d+%d past its %d bytes: %w", p.key(g.Slot), off, n, extent, ErrMismatch)
	}
	if p.body == nil || g.Slot != p.slot || off < p.lo || off+n > p.lo+int64(len(p.body)) {
		f := p.ahead
		p.ahead = nil
		if f != nil {
			<-f.done
		}
		ok := f != nil && f.err == nil && f.slot == g.Slot
		var body []byte
		var lo int64
		switch {
		case ok && off >= f.lo && off+n <= f.lo+int64(len(f.body)): // inside the chunk read ahead
			body, lo = f.body, f.lo
		case ok && p.body != nil && p.slot == g.Slot && f.lo == p.lo+int64(len(p.body)) && off >= p.lo && off+n <= f.lo+int64(len(f.body)):
			// Across the end of the chunk and into the one read ahead.
			body, lo = append(slices.Clone(p.body[off-p.lo:]), f.body...), off
		default: // a jump, or the first read: fetch from here
			f = p.fetch(ctx, g.Slot, off, min(max(n, mergeChunk), extent-off))
			<-f.done
			if f.err != nil {
				p.body = nil
				return nil, f.err
			}
			body, lo = f.body, f.lo
		}
		p.slot, p.lo, p.body = g.Slot, lo, body
		if next := p.lo + int64(len(p.body)); next < extent {
			p.ahead = p.fetch(ctx, p.slot, next, min(mergeChunk, extent-next))
		}
	}
	return p.body[off-p.lo : off-p.lo+n], nil
}

// close waits for the read ahead, if any (its result is dropped).
func (p *packReader) close() {
	if p.ahead != nil {
		<-p.ahead.done
		p.ahead = nil
	}
}
