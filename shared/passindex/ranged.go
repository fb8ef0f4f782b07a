package passindex

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// Per-stream lookups past the window budget (design 014, "Lookups past
// the window budget"). A per-stream lookup (HeadRefs and what calls it)
// that meets an object of the window not cached, with no room in the
// cache for it, reads the stream's part of it by range instead of
// fetching and decoding the whole object: its header (cached alone,
// when the cache has room for that), a block or two of its stream table
// (an interpolation search on the stream id, bisecting when a guess does
// not halve the range), then exactly the stream's segments and marks
// (and, version 2, when the lookup needs command state, the stream's
// command entry through the run's command index, or the whole command
// table: cmdindex.go). The objects of one lookup are read in parallel, up to
// RangedParallel at a time. Bulk walks (settle, takeover, tail recovery
// of every stream: VisitPasses, HeadRuns) keep fetching whole objects;
// settle's flush of few streams looks them up instead (StreamRuns,
// streamruns.go).

// RangedBlockBytes is the stream table a ranged lookup reads per GET:
// 910 entries. With stream ids drawn at random, the interpolation's
// first guess lands within a block's half-width of the entry at 100,000
// streams per object more than 99% of the time (the guess's error is
// about √n/2 entries), at 1,000,000 about two times in three; a miss
// narrows the range to two known ids, and the next guess lands.
const RangedBlockBytes = 64 << 10

// DefaultRangedParallel is Window.RangedParallel's default.
const DefaultRangedParallel = 8

// rangedFloor is the least a per-stream lookup guesses an object it has
// no size for to take decoded: with less room than the guess, it reads
// the object's header first (and by range, when that shows no room).
const rangedFloor = 64 << 10

// headerReserve: a per-stream lookup caches an object it fetched whole
// only if it leaves 1/headerReserve of the budget free (storeWithin),
// where the headers of the objects it reads by range are cached (a
// header never evicts).
const headerReserve = 64

// rangedDir is a per-object sparse directory of a cached header: stream
// table entries (index and id) ranged lookups read, the latest
// dirPoints of them. A later lookup starts its search between the two nearest, not
// between the ends of the id space: with ids far from uniform over the
// whole space (clustered), the first lookup's reads teach the next ones
// where the ids are.
type rangedDir struct {
	mu   sync.Mutex
	pts  []dirPoint
	next int       // the oldest point, once full
	cx   cmdxState // the object's command index (cmdindex.go)
}

type dirPoint struct {
	idx uint32
	id  format.StreamID
}

// dirPoints bounds a directory (what a cached header counts against the
// budget includes them).
const dirPoints = 32

// bounds narrows [lo, hi) and its keys to the nearest points around id.
func (d *rangedDir) bounds(id format.StreamID, lo, hi *uint32, kLo, kHi *float64) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.pts {
		switch c := bytes.Compare(p.id[:], id[:]); {
		case c < 0 && p.idx+1 > *lo && p.idx < *hi:
			*lo, *kLo = p.idx+1, idKey(p.id)
		case c > 0 && p.idx < *hi && p.idx >= *lo:
			*hi, *kHi = p.idx, idKey(p.id)
		}
	}
}

func (d *rangedDir) add(idx uint32, id format.StreamID) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch p := (dirPoint{idx, id}); {
	case slices.Contains(d.pts, p):
	case len(d.pts) < dirPoints:
		d.pts = append(d.pts, p)
	default: // full: the oldest point gives way
		d.pts[d.next] = p
		d.next = (d.next + 1) % dirPoints
	}
}

// cmdMode is which parts of a per-stream lookup carry command state.
type cmdMode uint8

const (
	cmdNone cmdMode = iota // none (reads by seq, the probe)
	cmdAll                 // every part (HeadRefs)
	cmdLast                // the last part alone (LastRef: a tail recovery)
)

// streamHit is one window object's part of a per-stream lookup.
type streamHit struct {
	obj  *format.PassIndex   // the object's epoch, slots and Merged (no streams)
	ents []format.PassStream // the stream's entries in it, their own copies
	done chan struct{}       // a ranged lookup's: closed when it ends
	err  error
	// A ranged lookup's object and the entries' stream table indexes
	// (cmdLast reads the last part's command state afterwards).
	key string
	hdr format.PassHeader
	idx []uint32
	// dir is the object's cached directory (nil: none); index, whether
	// it may have a command index (a run or merged run: cmdindex.go).
	dir   *rangedDir
	index bool
}

// streamWalk is one per-stream lookup over the window's objects: its
// getter (get) and visitor (add) for Window.visit.
type streamWalk struct {
	w        *Window
	id       format.StreamID
	commands cmdMode
	sem      chan struct{}
	wg       sync.WaitGroup
	pending  map[*format.PassIndex]*streamHit // stand-ins get returned
	hits     []*streamHit
	// headerFirst: an object with no cached header is never fetched
	// whole on a guess of its size; its header is read first (StreamRuns:
	// settle's flush of few streams, whose runs are large).
	headerFirst bool
}

func (w *Window) newStreamWalk(id format.StreamID, commands cmdMode) *streamWalk {
	n := w.RangedParallel
	if n <= 0 {
		n = DefaultRangedParallel
	}
	return &streamWalk{w: w, id: id, commands: commands, sem: make(chan struct{}, n), pending: map[*format.PassIndex]*streamHit{}}
}

// get returns the object of kind at `at`: cached, or fetched whole when
// the cache has room for it (its size known from a cached header, else
// guessed from the largest object seen), else a stand-in (the header's
// epoch and slots: the walk goes on to the next object) while a ranged
// lookup of the stream in it runs in the background.
func (sw *streamWalk) get(ctx context.Context, c metastore.ChainID, at metastore.Cursor, kind indexKind) (*format.PassIndex, int64, error) {
	w := sw.w
	w.mu.Lock()
	p := w.lookupLocked(passAt{c, at, kind})
	var h *format.PassHeader
	var dir *rangedDir
	var decoded int64
	if p == nil {
		if el := w.cache[passAt{c, at, kind | kindHeader}]; el != nil {
			w.lru.MoveToFront(el)
			e := el.Value.(*cacheEntry)
			h, dir, decoded = e.h, e.dir, e.decoded
		}
	}
	room, guess := w.budget()-w.bytes-w.budget()/headerReserve, max(w.largest, rangedFloor)
	w.mu.Unlock()
	if p != nil {
		return p, allocObject + sizeIndex + int64(cap(p.Streams))*sizeStream, nil
	}
	if h == nil && room >= guess && !sw.headerFirst {
		return w.fetchWithin(ctx, c, at, kind)
	}
	key, what := objectKey(c, at, kind)
	if h == nil {
		got, d, err := w.getHeader(ctx, c, at, kind)
		if err != nil {
			return nil, 0, err
		}
		h, dir = &got, d
	}
	// The header does not count command states (version 2): the size
	// is a floor until a whole fetch learns it (fetchWithin).
	est := h.DecodedBytes(allocObject+sizeIndex, sizeStream, sizeSegment, sizeMark)
	est = max(est, decoded)
	w.mu.Lock()
	w.largest = max(w.largest, est)
	room = w.budget() - w.bytes - w.budget()/headerReserve
	if est > room {
		w.ranged++
	}
	w.mu.Unlock()
	if est <= room {
		return w.fetchWithin(ctx, c, at, kind)
	}
	stub := &format.PassIndex{Epoch: h.Epoch, FirstSlot: h.FirstSlot, EndSlot: h.EndSlot, Digest: h.Digest, Merged: kind == kindMerged}
	hit := &streamHit{obj: stub, done: make(chan struct{}), key: key, hdr: *h, dir: dir, index: kind != kindPass}
	sw.pending[stub] = hit
	hdr := *h
	sw.sem <- struct{}{}
	sw.wg.Add(1)
	go func() {
		defer func() { <-sw.sem; close(hit.done); sw.wg.Done() }()
		ents, idx, err := w.findRanged(ctx, key, hdr, dir, sw.id, sw.commands == cmdAll, hit.index)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			hit.err = fmt.Errorf("chain %s: no %s at %s: %w: %w", c, what, at, ErrWindow, err)
		case err != nil:
			hit.err = fmt.Errorf("chain %s: %s at %s, stream %s by range: %w", c, what, at, sw.id, err)
		default:
			hit.ents, hit.idx = ents, idx
		}
	}()
	return stub, est, nil
}

// fetchWithin fetches the object of kind at `at` whole and caches it if
// it fits without evicting (storeWithin; else its header, with its size).
func (w *Window) fetchWithin(ctx context.Context, c metastore.ChainID, at metastore.Cursor, kind indexKind) (*format.PassIndex, int64, error) {
	p, size, err := w.fetch(ctx, c, at, kind)
	if err != nil {
		return nil, 0, err
	}
	h := format.PassHeader{Epoch: p.Epoch, FirstSlot: p.FirstSlot, EndSlot: p.EndSlot, Digest: p.Digest, Version: format.PassIndexVersion}
	var nSeg, nMark int
	for i := range p.Streams {
		nSeg += len(p.Streams[i].Segments)
		nMark += len(p.Streams[i].Marks)
		if p.Streams[i].Commands != nil {
			h.Version = max(h.Version, format.PassIndexVersionCommands)
		}
		if len(p.Streams[i].Carried) > 0 {
			h.Version = format.PassIndexVersionCarried
		}
	}
	h.Streams, h.Segments, h.Marks = uint32(len(p.Streams)), uint32(nSeg), uint32(nMark)
	w.storeWithin(passAt{c, at, kind}, p, size, h)
	return p, allocObject + sizeIndex + int64(cap(p.Streams))*sizeStream, nil
}

// add is the walk's visitor: a stand-in's hit is the ranged lookup's; a
// whole object's, the stream's entries copied out of it (the object
// itself is not held past the walk's step).
func (sw *streamWalk) add(p *format.PassIndex) error {
	if hit := sw.pending[p]; hit != nil {
		sw.hits = append(sw.hits, hit)
		return nil
	}
	hit := &streamHit{obj: &format.PassIndex{Epoch: p.Epoch, FirstSlot: p.FirstSlot, EndSlot: p.EndSlot, Digest: p.Digest, Merged: p.Merged}}
	for _, s := range p.FindAll(sw.id) {
		s.Segments = slices.Clone(s.Segments)
		s.Marks = slices.Clone(s.Marks)
		s.Carried = slices.Clone(s.Carried)
		hit.ents = append(hit.ents, s)
	}
	sw.hits = append(sw.hits, hit)
	return nil
}

// wait waits for the walk's ranged lookups and returns the first error
// among its hits, in walk order.
func (sw *streamWalk) wait() error {
	sw.wg.Wait()
	for _, hit := range sw.hits {
		if hit.err != nil {
			return hit.err
		}
	}
	for _, hit := range sw.pending { // a lookup the walk stopped before adding
		if hit.err != nil {
			return hit.err
		}
	}
	return nil
}

// getHeader reads the header of the object of kind at `at` by range and
// caches it alone (when the cache has room without evicting).
func (w *Window) getHeader(ctx context.Context, c metastore.ChainID, at metastore.Cursor, kind indexKind) (format.PassHeader, *rangedDir, error) {
	key, what := objectKey(c, at, kind)
	b, err := w.readRange(ctx, key, 0, format.PassHeaderSize)
	if errors.Is(err, objstore.ErrNotFound) {
		return format.PassHeader{}, nil, fmt.Errorf("chain %s: no %s at %s: %w: %w", c, what, at, ErrWindow, err)
	}
	if err != nil {
		return format.PassHeader{}, nil, fmt.Errorf("chain %s: %s at %s: header: %w", c, what, at, err)
	}
	h, err := format.ParsePassHeader(b)
	if err != nil {
		return format.PassHeader{}, nil, fmt.Errorf("chain %s: %s at %s: %w", c, what, at, err)
	}
	if h.Epoch != at.Epoch || h.FirstSlot != at.Slot {
		return format.PassHeader{}, nil, fmt.Errorf("chain %s: %s at %s is of %d/%d: %w", c, what, at, h.Epoch, h.FirstSlot, ErrWindow)
	}
	return h, w.storeHeader(passAt{c, at, kind}, h, 0), nil
}

// readRange GETs n bytes of key at off (n < 0: to the end), counted as
// ranged; fewer bytes than asked (an object shorter than its header's
// counts say) is an error matching format.ErrTruncated.
func (w *Window) readRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := w.Bucket.Get(ctx, key, off, n)
	w.mu.Lock()
	w.rangedGets++
	w.rangedBytes += int64(len(b))
	w.mu.Unlock()
	if errors.Is(err, objstore.ErrRange) {
		return nil, fmt.Errorf("%d bytes at %d: %w: %w", n, off, format.ErrTruncated, err)
	}
	if err != nil {
		return nil, err
	}
	if n >= 0 && int64(len(b)) != n {
		return nil, fmt.Errorf("%d bytes at %d, got %d: %w", n, off, len(b), format.ErrTruncated)
	}
	return b, nil
}

// FindRanged returns stream id's entries (none, one, or a merged run's
// marker then packed entry: what PassIndex.FindAll returns) in the pass
// index object at key of bucket b, read by range: its header, blocks of
// its stream table, the stream's segments and marks and, when commands
// is set and the object is version 2, its command state: through the
// object's command index (format.CommandIndexKey) when it has a usable
// one, else from its whole command table (without
// commands the entries carry no command state). It is the ranged lookup
// the window makes past its budget, without the window (tests, tools).
func FindRanged(ctx context.Context, b objstore.Bucket, key string, id format.StreamID, commands bool) ([]format.PassStream, error) {
	w := &Window{Bucket: b, CommandIndexGetBytes: -1}
	hb, err := w.readRange(ctx, key, 0, format.PassHeaderSize)
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", key, err)
	}
	h, err := format.ParsePassHeader(hb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	ents, _, err := w.findRanged(ctx, key, h, nil, id, commands, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return ents, nil
}

// findRanged is FindRanged with the header read; it returns the
// entries' stream table indexes too. index: the object may have a
// command index (a run or merged run).
func (w *Window) findRanged(ctx context.Context, key string, h format.PassHeader, dir *rangedDir, id format.StreamID, commands, index bool) ([]format.PassStream, []uint32, error) {
	ents, err := w.searchEntries(ctx, key, h, dir, id)
	if err != nil || len(ents) == 0 {
		return nil, nil, err
	}
	var nSeg, nMark uint64
	for i, e := range ents {
		if i > 0 && (e.Index != ents[i-1].Index+1 || e.SegFirst != ents[i-1].SegFirst+ents[i-1].SegN || e.MarkFirst != ents[i-1].MarkFirst+ents[i-1].MarkN) {
			return nil, nil, fmt.Errorf("pass index entry %d does not follow entry %d: %w", e.Index, ents[i-1].Index, format.ErrBounds)
		}
		nSeg += uint64(e.SegN)
		nMark += uint64(e.MarkN)
	}
	// ParsePassEntries bounded each entry's segments and marks by the
	// header's counts, and the entries continue each other: the reads
	// below are inside the tables.
	var (
		segs  []format.PassSegment
		marks []format.PassMark
		cmds  []format.CommandEntry
		carry []format.CarriedEntry
		errs  [4]error
		wg    sync.WaitGroup
	)
	if nSeg > 0 {
		wg.Go(func() {
			b, err := w.readRange(ctx, key, h.SegmentAt(ents[0].SegFirst), int64(nSeg)*format.PassSegmentSize)
			if err == nil {
				segs, err = format.ParsePassSegments(b)
			}
			errs[0] = err
		})
	}
	if nMark > 0 {
		wg.Go(func() {
			b, err := w.readRange(ctx, key, h.MarkAt(ents[0].MarkFirst), int64(nMark)*format.PassMarkSize)
			if err == nil {
				marks, err = format.ParsePassMarks(b)
			}
			errs[1] = err
		})
	}
	if h.Version == format.PassIndexVersionCarried && nSeg > 0 {
		// Carried tables (ADR 0062) always: a successor's dedupe table
		// is the union of its parts' (star.RecoverStream). One read of
		// the tail gives the command state too.
		idxs := make([]uint32, len(ents))
		for i, e := range ents {
			idxs[i] = e.Index
		}
		wg.Go(func() {
			gotCmds, got, err := w.rangedTail(ctx, key, h, idxs)
			for _, i := range idxs {
				if c, ok := got[i]; ok {
					carry = append(carry, c)
				}
				if c, ok := gotCmds[i]; ok && commands {
					cmds = append(cmds, format.CommandEntry{Entry: i, Commands: c})
				}
			}
			errs[3] = err
		})
	}
	if commands && h.Version == format.PassIndexVersionCommands && nSeg > 0 {
		// Markers have no command state, a stream's packed entry may:
		// both are asked for, so that state given to a marker (a corrupt
		// object) is refused (AssemblePassStreams), as a whole decode
		// refuses it.
		idxs := make([]uint32, len(ents))
		for i, e := range ents {
			idxs[i] = e.Index
		}
		wg.Go(func() {
			got, err := w.rangedCommands(ctx, key, h, dir, index, idxs)
			for _, i := range idxs {
				if c, ok := got[i]; ok {
					cmds = append(cmds, format.CommandEntry{Entry: i, Commands: c})
				}
			}
			errs[2] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, nil, err
	}
	out, err := format.AssemblePassStreamsCarried(h, ents, segs, marks, cmds, carry)
	if err != nil {
		return nil, nil, err
	}
	idx := make([]uint32, len(ents))
	for i, e := range ents {
		idx[i] = e.Index
	}
	return out, idx, nil
}

// lastCommands sets the command state of the last of refs (cmdLast),
// read by range from its object (rangedCommands) when a ranged lookup
// found it (a whole object's entries have theirs), and drops the others'.
func (w *Window) lastCommands(ctx context.Context, hits []*streamHit, refs []metastore.Ref) error {
	if len(refs) == 0 {
		return nil
	}
	for i := range refs[:len(refs)-1] {
		refs[i].Commands = nil
	}
	last := &refs[len(refs)-1]
	for i := len(hits) - 1; i >= 0; i-- {
		hit := hits[i]
		for j := range hit.ents {
			s := &hit.ents[j]
			if s.Marker() || s.FirstSeq != last.FirstSeq {
				continue
			}
			if hit.idx == nil || hit.hdr.Version < format.PassIndexVersionCommands {
				return nil // a whole object's, or a version 1 object's: no table to read
			}
			got, err := w.rangedCommands(ctx, hit.key, hit.hdr, hit.dir, hit.index, hit.idx[j:j+1])
			if err != nil {
				return err
			}
			last.Commands = nil
			if cs, ok := got[hit.idx[j]]; ok {
				if err := cs.Validate(); err != nil {
					return fmt.Errorf("%s: stream %s: %v: %w", hit.key, s.Stream, err, format.ErrMalformed)
				}
				last.Commands = &cs
			}
			return nil
		}
	}
	return nil
}

// searchEntries finds stream id's entries in the stream table of the
// object at key (header h) by ranged reads of RangedBlockBytes blocks:
// an interpolation search on the id's first 8 bytes (uniform: stream ids
// are random), bisecting instead (reading a sixteenth of a block) after
// a read that did not halve the range (ids not uniform, or a guess that
// missed), so a lookup costs
// O(log(streams/block)) reads at worst and one or two at best. The
// answer is bounded and checked as ParsePassEntries checks a block;
// hostile objects give errors, never a loop: each read shrinks the range.
func (w *Window) searchEntries(ctx context.Context, key string, h format.PassHeader, dir *rangedDir, id format.StreamID) ([]format.PassEntry, error) {
	block := uint32(RangedBlockBytes / format.PassEntrySize)
	read := func(from, to uint32) ([]format.PassEntry, error) {
		b, err := w.readRange(ctx, key, h.EntryAt(from), int64(to-from)*format.PassEntrySize)
		if err != nil {
			return nil, fmt.Errorf("stream table %d-%d: %w", from, to, err)
		}
		ents, err := format.ParsePassEntries(h, from, b)
		if err == nil {
			dir.add(from, ents[0].Stream)
			dir.add(to-1, ents[len(ents)-1].Stream)
		}
		return ents, err
	}
	// Every entry below lo is before id, every entry from hi on after
	// it; kLo and kHi bound the ids' keys in between.
	lo, hi := uint32(0), h.Streams
	kLo, kHi := 0.0, math.Ldexp(1, 64)
	dir.bounds(id, &lo, &hi, &kLo, &kHi)
	t := idKey(id)
	bisect := false
	for lo < hi {
		width := hi - lo
		// A bisection step reads a sixteenth of a block: it is there to
		// learn the id at the middle, not to land.
		g, size := lo+width/2, max(block/16, 1)
		if !bisect && kLo <= t && t <= kHi && kLo < kHi {
			g = lo + uint32(min((t-kLo)/(kHi-kLo)*float64(width), float64(width-1)))
			size = block
		}
		start := lo
		if g-lo > size/2 {
			start = g - size/2
		}
		end := hi
		if end-start > size {
			end = start + size
		}
		ents, err := read(start, end)
		if err != nil {
			return nil, err
		}
		first, last := &ents[0], &ents[len(ents)-1]
		switch {
		case bytes.Compare(id[:], first.Stream[:]) < 0:
			hi, kHi = start, idKey(first.Stream)
		case bytes.Compare(id[:], last.Stream[:]) > 0:
			lo, kLo = end, idKey(last.Stream)
		default:
			i := sort.Search(len(ents), func(i int) bool { return bytes.Compare(ents[i].Stream[:], id[:]) >= 0 })
			if ents[i].Stream != id {
				return nil, nil
			}
			j := i + 1
			for j < len(ents) && ents[j].Stream == id {
				j++
			}
			out := slices.Clone(ents[i:j])
			// A merged run's marker and packed entry may straddle the
			// block's edge (inside the range: outside it, the search
			// already read the neighbour and it is another stream's).
			if i == 0 && start > lo {
				prev, err := read(start-1, start)
				if err != nil {
					return nil, err
				}
				if prev[0].Stream == id {
					out = append(prev, out...)
				}
			}
			if j == len(ents) && end < hi {
				next, err := read(end, end+1)
				if err != nil {
					return nil, err
				}
				if next[0].Stream == id {
					out = append(out, next[0])
				}
			}
			if len(out) > 2 {
				return nil, fmt.Errorf("stream table: stream %s at %d entries: %w", id, len(out), format.ErrMalformed)
			}
			return out, nil
		}
		bisect = hi-lo > width/2
	}
	return nil, nil
}

// idKey is a stream id's place in the id space, for interpolation.
func idKey(id format.StreamID) float64 { return float64(binary.BigEndian.Uint64(id[:8])) }
