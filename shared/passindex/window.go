package passindex

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// Window finds streams' records in the pass indexes of a chain's
// absorbed window (design 014): the passes from a pass boundary (the
// settled cursor, once settle consumes whole passes) up to the checkpoint,
// found by key, not listed: the pass at a cursor names its end, where the
// next pass starts, and an epoch below the checkpoint's ends at its fenced
// cut (then {epoch+1, 0}). Pass indexes are immutable, so decoded ones are
// cached, up to MaxBytes (windowcache.go): a lookup costs one GET per
// pass the window gained since the last one, and none for a pass still
// cached (Prune drops what left the window; past the budget the least
// recently used are evicted and fetched again on their next use). A
// per-stream lookup that meets an object not cached with no room for it
// reads the stream's part of it by range instead (ranged.go). Safe for
// concurrent use.
type Window struct {
	Meta   metastore.Store // for epoch cuts
	Bucket objstore.Bucket // where the pass indexes are (the settled bucket)
	// MaxPasses bounds the passes one window walk visits (0:
	// DefaultMaxWindowPasses): a window is the settle interval's passes.
	MaxPasses int
	// Parallel (0: off) makes the first walk of a chain's passes, runs and
	// merged runs a cold load: LIST their keys, GET those of the window
	// Parallel at a time (preload.go), instead of one GET at a time. It
	// needs List on the settled bucket's index/ prefix; without it the
	// walk fetches one at a time.
	Parallel int
	// MaxBytes bounds the decoded objects cached (DecodedBytes; 0:
	// DefaultWindowCacheBytes; below 0: unbounded). An object larger than
	// it is fetched and used but not cached.
	MaxBytes int64
	// RangedParallel bounds the ranged lookups (of the window's objects
	// past the cache's budget) one per-stream lookup keeps in flight (0:
	// DefaultRangedParallel; design 014, "Lookups past the window
	// budget").
	RangedParallel int
	// CommandIndexGetBytes is what a ranged GET is worth in bytes when a
	// per-stream lookup chooses between a run's command index (a block
	// and an entry per stream: design 014, "The command index") and its
	// whole command table (one GET): it reads the index when the table is
	// larger than its GETs times this (0: RangedBlockBytes; below 0: the
	// index whenever the run has a usable one).
	CommandIndexGetBytes int64

	mu            sync.Mutex
	cache         map[passAt]*list.Element // of *cacheEntry, in lru
	lru           list.List                // front: most recently used
	bytes         int64                    // DecodedBytes of the cached objects
	headers       int                      // of the cache's entries, headers alone
	gets, evicted int64
	// getBytes is what whole GETs fetched; largest, the largest
	// DecodedBytes (or header estimate) seen: a per-stream lookup's guess
	// of an uncached object's size (ranged.go).
	getBytes, largest int64
	// ranged counts the per-stream lookups past the budget (ranged.go):
	// objects looked up, their GETs and bytes (headers included).
	ranged, rangedGets, rangedBytes int64
	// The command state lookups by range read (cmdindex.go): whole
	// command tables, objects read through their command index, and
	// command indexes missing or refused (of another run, corrupt).
	cmdTables, cmdxReads, cmdxMissing, cmdxRefused int64
	// pruned is, per chain, the head at the last pruneTo.
	pruned map[metastore.ChainID]metastore.Head
	// loaded records, per chain and kind ({c, kind}), that the cold load
	// ran (Parallel).
	loaded map[passAt]bool
	// cuts caches the cut of each epoch below a window's end (a fenced
	// cut is final, and an epoch number never minted below a minted one
	// never will be): key passAt{c, {epoch, 0}}, value cut+1 (0: none).
	cuts map[passAt]uint64
	// legacy caches IndexedFrom's probes of heads without Indexed.
	legacy map[indexedAt]metastore.Cursor
}

// passAt names a pass (or a run, or a merged run): its chain, first
// cursor and kind.
type passAt struct {
	c    metastore.ChainID
	at   metastore.Cursor
	kind indexKind
}

// indexKind is what an index object of the window is.
type indexKind uint8

const (
	kindPass   indexKind = iota // a pass index (level 0)
	kindRun                     // a settle step's run (level 1)
	kindMerged                  // a merged run (level 2)

	// kindHeader marks a cache key of an object's header alone (the
	// object's kind | kindHeader; ranged.go).
	kindHeader indexKind = 0x80
)

// base is the object kind of a cache key's kind (a header's object's).
func (k indexKind) base() indexKind { return k &^ kindHeader }

// DefaultMaxWindowPasses bounds a window walk: at 4 passes a second, over
// two hours of passes, far more than a settle interval.
const DefaultMaxWindowPasses = 1 << 15

// ErrWindow: the window's passes cannot be walked (a pass index missing
// inside it, an epoch unfenced, a pass that does not continue the walk, or
// more passes than MaxPasses). A pass index missing below a moved cursor
// is a race with settle and trim: re-read the head and retry.
var ErrWindow = errors.New("passindex: pass index window broken")

// Passes returns the pass indexes of chain c from `from` (a pass
// boundary) up to `to` (the checkpoint), in order.
func (w *Window) Passes(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor) ([]*format.PassIndex, error) {
	return w.walk(ctx, c, from, to, kindPass, metastore.Cursor{})
}

// Runs returns the level-1 run indexes (design 014, level 1) of chain c
// from `from` up to `to`, in order: walked by key as passes are (a run
// names its end, where the next starts), never a merged run.
func (w *Window) Runs(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor) ([]*format.PassIndex, error) {
	return w.walk(ctx, c, from, to, kindRun, metastore.Cursor{})
}

// HeadRuns returns the live runs of head h, [h.Flushed, h.Settled), in
// order: at a slot below h.Merged the merged run there (design 014, level
// 2), else the level-1 run at that slot. Any mix is the same records (a
// merged run resolves the runs it covers); only a missing object is an
// error (ErrWindow, matching objstore.ErrNotFound: re-read the head).
func (w *Window) HeadRuns(ctx context.Context, c metastore.ChainID, h metastore.Head) ([]*format.PassIndex, error) {
	return w.walk(ctx, c, h.Flushed, h.Settled, kindRun, h.Merged)
}

// Run is the run index of chain c at `at`, or an error matching
// objstore.ErrNotFound when there is none.
func (w *Window) Run(ctx context.Context, c metastore.ChainID, at metastore.Cursor) (*format.PassIndex, error) {
	return w.get(ctx, c, at, kindRun)
}

// MergedRun is the merged run of chain c at `at` (its Merged set), or an
// error matching objstore.ErrNotFound when there is none.
func (w *Window) MergedRun(ctx context.Context, c metastore.ChainID, at metastore.Cursor) (*format.PassIndex, error) {
	return w.get(ctx, c, at, kindMerged)
}

// AddMerged caches a merged run the caller wrote or adopted (settle).
func (w *Window) AddMerged(c metastore.ChainID, r *format.PassIndex) {
	r.Merged = true
	w.store(passAt{c, metastore.Cursor{Epoch: r.Epoch, Slot: r.FirstSlot}, kindMerged}, r, DecodedBytes(r))
}

// AddRun caches a run index the caller wrote (settle), so that the next
// walk does not GET it back.
func (w *Window) AddRun(c metastore.ChainID, r *format.PassIndex) {
	w.store(passAt{c, metastore.Cursor{Epoch: r.Epoch, Slot: r.FirstSlot}, kindRun}, r, DecodedBytes(r))
}

// VisitPasses calls fn with each pass index of chain c from `from` up to
// `to`, in order, as Passes returns them, one at a time: the caller's
// peak is the cache's budget plus the object in hand, never the whole
// window. An error from fn stops the walk and is returned.
func (w *Window) VisitPasses(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, fn func(*format.PassIndex) error) error {
	return w.visit(ctx, c, from, to, kindPass, metastore.Cursor{}, w.getSized, fn)
}

// VisitHeadRuns is HeadRuns one run at a time (VisitPasses).
func (w *Window) VisitHeadRuns(ctx context.Context, c metastore.ChainID, h metastore.Head, fn func(*format.PassIndex) error) error {
	return w.visit(ctx, c, h.Flushed, h.Settled, kindRun, h.Merged, w.getSized, fn)
}

// walk is visit collected: the whole stretch held at once (settle's
// steps, which need their runs together).
func (w *Window) walk(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, kind indexKind, merged metastore.Cursor) ([]*format.PassIndex, error) {
	var out []*format.PassIndex
	if err := w.visit(ctx, c, from, to, kind, merged, w.getSized, func(p *format.PassIndex) error { out = append(out, p); return nil }); err != nil {
		return nil, err
	}
	return out, nil
}

// getter fetches the index object of kind at `at` (or, for a per-stream
// lookup past the budget, a stand-in: ranged.go) and its decoded size, or
// an estimate of it.
type getter func(ctx context.Context, c metastore.ChainID, at metastore.Cursor, kind indexKind) (*format.PassIndex, int64, error)

// getSized is get with the object's stream entries' size (DecodedBytes
// walks every entry; this is visit's room check's floor, in constant
// time).
func (w *Window) getSized(ctx context.Context, c metastore.ChainID, at metastore.Cursor, kind indexKind) (*format.PassIndex, int64, error) {
	p, err := w.get(ctx, c, at, kind)
	if err != nil {
		return nil, 0, err
	}
	return p, allocObject + sizeIndex + int64(cap(p.Streams))*sizeStream, nil
}

// visit follows the indexes of kind from `from` to `to`, calling fn with
// each in order, as get returns them; for runs, below merged it reads
// the merged run at a slot when there is one.
func (w *Window) visit(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, kind indexKind, merged metastore.Cursor, get getter, fn func(*format.PassIndex) error) error {
	max := w.MaxPasses
	if max <= 0 {
		max = DefaultMaxWindowPasses
	}
	if w.Parallel > 0 {
		if kind == kindRun && from.Less(merged) {
			w.preload(ctx, c, kindMerged, from, merged)
			w.preload(ctx, c, kindRun, merged, to)
		} else {
			w.preload(ctx, c, kind, from, to)
		}
	}
	n, misses, reloaded, lastSize := 0, 0, false, int64(0)
	for at := from; at.Less(to); {
		if n >= max {
			return fmt.Errorf("chain %s: window %s-%s over %d passes or runs: %w", c, from, to, max, ErrWindow)
		}
		if at.Epoch < to.Epoch {
			cut, exists, err := w.cut(ctx, c, at.Epoch)
			if err != nil {
				return err
			}
			if !exists || at.Slot >= cut {
				at = metastore.Cursor{Epoch: at.Epoch + 1}
				continue
			}
		}
		if w.Parallel > 0 && !reloaded {
			// Consecutive misses: load the rest of the range in parallel
			// (MissesBeforeReload).
			miss := !w.has(passAt{c, at, kind})
			if kind == kindRun {
				miss = miss && !w.has(passAt{c, at, kindMerged})
			}
			if miss {
				misses++
			} else {
				misses = 0
			}
			// Only with room in the cache for at least that many more
			// objects of the last one's size: a cache smaller than the
			// window would evict what the load fetched before the walk
			// reached it.
			if misses >= MissesBeforeReload && w.room() >= int64(MissesBeforeReload)*lastSize {
				reloaded = true
				if kind == kindRun && at.Less(merged) {
					w.load(ctx, c, kindMerged, at, merged)
					w.load(ctx, c, kindRun, merged, to)
				} else {
					w.load(ctx, c, kind, at, to)
				}
			}
		}
		var p *format.PassIndex
		var size int64
		var err error
		if kind == kindRun && at.Less(merged) {
			p, size, err = get(ctx, c, at, kindMerged)
			if errors.Is(err, objstore.ErrNotFound) {
				// No merged run starts here (a flushed cursor inside a
				// merged range): the level-1 run does, until trim passes.
				p, size, err = get(ctx, c, at, kindRun)
			}
		} else {
			p, size, err = get(ctx, c, at, kind)
		}
		if err != nil {
			return err
		}
		n++
		lastSize = size
		if err := fn(p); err != nil {
			return err
		}
		at.Slot = p.EndSlot
	}
	return nil
}

// cut is EpochCut of an epoch the chain has moved past, cached.
func (w *Window) cut(ctx context.Context, c metastore.ChainID, epoch uint64) (uint64, bool, error) {
	k := passAt{c, metastore.Cursor{Epoch: epoch}, kindPass}
	w.mu.Lock()
	v, ok := w.cuts[k]
	w.mu.Unlock()
	if ok {
		return v - 1, v > 0, nil
	}
	cut, exists, err := EpochCut(ctx, w.Meta, c, epoch)
	if err != nil {
		return 0, false, err
	}
	w.mu.Lock()
	if w.cuts == nil {
		w.cuts = map[passAt]uint64{}
	}
	if exists {
		w.cuts[k] = cut + 1
	} else {
		w.cuts[k] = 0
	}
	w.mu.Unlock()
	return cut, exists, nil
}

// objectKey is the key of the index object of kind at `at` of chain c, and
// what it is called in errors.
func objectKey(c metastore.ChainID, at metastore.Cursor, kind indexKind) (key, what string) {
	switch kind {
	case kindRun:
		return format.RunIndexKey(c.Star, c.Class.String(), at.Epoch, at.Slot), "run index"
	case kindMerged:
		return format.MergedRunKey(c.Star, c.Class.String(), at.Epoch, at.Slot), "merged run"
	}
	return format.PassIndexKey(c.Star, c.Class.String(), at.Epoch, at.Slot), "pass index"
}

func (w *Window) get(ctx context.Context, c metastore.ChainID, at metastore.Cursor, kind indexKind) (*format.PassIndex, error) {
	w.mu.Lock()
	p := w.lookupLocked(passAt{c, at, kind})
	w.mu.Unlock()
	if p != nil {
		return p, nil
	}
	q, size, err := w.fetch(ctx, c, at, kind)
	if err != nil {
		return nil, err
	}
	w.store(passAt{c, at, kind}, q, size)
	return q, nil
}

// fetch GETs and decodes the object of kind at `at` whole, and returns
// its DecodedBytes; it does not cache it.
func (w *Window) fetch(ctx context.Context, c metastore.ChainID, at metastore.Cursor, kind indexKind) (*format.PassIndex, int64, error) {
	key, what := objectKey(c, at, kind)
	w.mu.Lock()
	w.gets++
	w.mu.Unlock()
	obj, err := w.Bucket.Get(ctx, key, 0, -1)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, 0, fmt.Errorf("chain %s: no %s at %s: %w: %w", c, what, at, ErrWindow, err)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("chain %s: %s at %s: %w", c, what, at, err)
	}
	q, err := format.ParsePassIndex(obj)
	if err != nil {
		return nil, 0, fmt.Errorf("chain %s: %s at %s: %w", c, what, at, err)
	}
	if q.Epoch != at.Epoch || q.FirstSlot != at.Slot {
		return nil, 0, fmt.Errorf("chain %s: %s at %s is of %d/%d: %w", c, what, at, q.Epoch, q.FirstSlot, ErrWindow)
	}
	q.Merged = kind == kindMerged
	size := DecodedBytes(&q)
	w.mu.Lock()
	w.getBytes += int64(len(obj))
	w.largest = max(w.largest, size)
	w.mu.Unlock()
	return &q, size, nil
}

// Prune drops the cached passes of chain c that end at or before `from`
// (they left the window: settle moved past them).
func (w *Window) Prune(c metastore.ChainID, from metastore.Cursor) {
	w.prune(c, func(k passAt, end metastore.Cursor) bool { return k.kind.base() == kindPass && !from.Less(end) })
}

// PruneRuns drops the cached runs (level 1 and merged) of chain c that end
// at or before `flushed` (they left the window: every record in them is
// behind refs).
func (w *Window) PruneRuns(c metastore.ChainID, flushed metastore.Cursor) {
	w.prune(c, func(k passAt, end metastore.Cursor) bool { return k.kind.base() != kindPass && !flushed.Less(end) })
}

// PruneMerged drops the cached level-1 runs of chain c that start below
// `merged` (design 014, level 2): walks read the merged runs there.
func (w *Window) PruneMerged(c metastore.ChainID, merged metastore.Cursor) {
	w.prune(c, func(k passAt, _ metastore.Cursor) bool { return k.kind.base() == kindRun && k.at.Less(merged) })
}

func (w *Window) prune(c metastore.ChainID, drop func(k passAt, end metastore.Cursor) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, el := range w.cache {
		p := el.Value.(*cacheEntry).p
		if k.c == c && drop(k, metastore.Cursor{Epoch: p.Epoch, Slot: p.EndSlot}) {
			w.removeLocked(el)
		}
	}
}

// pruneTo prunes the cache of chain c to the flushed and settled cursors
// of a head read, once per move of either: the cache of a long-lived
// reader holds the window's runs and passes, not every one it ever read.
func (w *Window) pruneTo(c metastore.ChainID, h metastore.Head) {
	w.mu.Lock()
	last, ok := w.pruned[c]
	if ok && !last.Settled.Less(h.Settled) && !last.Flushed.Less(h.Flushed) && !last.Merged.Less(h.Merged) {
		w.mu.Unlock()
		return
	}
	if w.pruned == nil {
		w.pruned = map[metastore.ChainID]metastore.Head{}
	}
	w.pruned[c] = h
	w.mu.Unlock()
	w.Prune(c, h.Settled)
	w.PruneRuns(c, h.Flushed)
	w.PruneMerged(c, h.Merged)
}

// Cached is how many decoded pass indexes the window holds.
func (w *Window) Cached() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.cache) - w.headers
}

// Refs returns the parts of stream id in the passes of [from, to) that end
// at or after fromSeq, in seq order, each as a ref with transit locations
// (what metastore.QueryRefs returns for refs an absorb wrote before
// design 014), so a reader reads them as it reads refs. The search is a
// binary search per pass: O(passes x log streams), never a scan of the
// stream's history.
func (w *Window) Refs(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, id format.StreamID, fromSeq uint64) ([]metastore.Ref, error) {
	return w.refs(ctx, c, from, to, id, func(s *format.PassStream) bool { return s.LastSeq >= fromSeq })
}

// RefsAt returns the parts of stream id in the passes of [from, to) from
// the first that holds a record with timestamp >= tsMs (timestamps never
// decrease within a stream, so every later part qualifies too), in seq
// order. Bounded as Refs is.
func (w *Window) RefsAt(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, id format.StreamID, tsMs int64) ([]metastore.Ref, error) {
	return w.refs(ctx, c, from, to, id, func(s *format.PassStream) bool { return s.LastTsMs >= tsMs })
}

func (w *Window) refs(ctx context.Context, c metastore.ChainID, from, to metastore.Cursor, id format.StreamID, keep func(*format.PassStream) bool) ([]metastore.Ref, error) {
	return w.parts(ctx, c, from, from, from, from, to, id, keep, cmdAll)
}

// HeadRefs is Refs over the whole window of head h: the runs of
// [h.Flushed, h.Settled) (packed entries after the stream's last marker:
// a marker's seqs are behind a ref) then the passes of [h.Settled,
// h.Checkpoint), each from where the chain's indexed passes begin
// (IndexedFrom, WindowFrom: below it every record is behind a ref, and a
// chain not indexed has no window).
func (w *Window) HeadRefs(ctx context.Context, c metastore.ChainID, h metastore.Head, id format.StreamID, fromSeq uint64) ([]metastore.Ref, error) {
	return w.windowRefs(ctx, c, h, id, func(s *format.PassStream) bool { return s.LastSeq >= fromSeq }, cmdAll)
}

// HeadParts is HeadRefs without command state (every ref's Commands
// nil): what reads by seq and the probe need, and cheaper past the
// window budget (a ranged lookup of a version 2 object skips its command
// table; design 014, "Lookups past the window budget").
func (w *Window) HeadParts(ctx context.Context, c metastore.ChainID, h metastore.Head, id format.StreamID, fromSeq uint64) ([]metastore.Ref, error) {
	return w.windowRefs(ctx, c, h, id, func(s *format.PassStream) bool { return s.LastSeq >= fromSeq }, cmdNone)
}

// HeadLastRef is the last of HeadRefs's parts, with its command state
// (ok false: the stream has no part in the window): what LastRef reads of
// the window, all a tail recovery needs of it. Past the window budget it
// reads one command table by range, the last part's object's, not every
// object's (design 014, "Lookups past the window budget").
func (w *Window) HeadLastRef(ctx context.Context, c metastore.ChainID, h metastore.Head, id format.StreamID) (metastore.Ref, bool, error) {
	parts, err := w.windowRefs(ctx, c, h, id, func(*format.PassStream) bool { return true }, cmdLast)
	if err != nil || len(parts) == 0 {
		return metastore.Ref{}, false, err
	}
	return parts[len(parts)-1], true, nil
}

// HeadRefsAt is RefsAt over the whole window of head h (HeadRefs).
func (w *Window) HeadRefsAt(ctx context.Context, c metastore.ChainID, h metastore.Head, id format.StreamID, tsMs int64) ([]metastore.Ref, error) {
	return w.windowRefs(ctx, c, h, id, func(s *format.PassStream) bool { return s.LastTsMs >= tsMs }, cmdAll)
}

func (w *Window) windowRefs(ctx context.Context, c metastore.ChainID, h metastore.Head, id format.StreamID, keep func(*format.PassStream) bool, commands cmdMode) ([]metastore.Ref, error) {
	indexed, err := w.IndexedFrom(ctx, c, h)
	if err != nil {
		return nil, err
	}
	runsFrom, passesFrom, ok := WindowFrom(h, indexed)
	if !ok {
		return nil, nil // refs mode: every record is behind a ref
	}
	return w.parts(ctx, c, runsFrom, h.Settled, h.Merged, passesFrom, h.Checkpoint, id, keep, commands)
}

// parts is stream id's parts in the runs of [runsFrom, settled) (merged
// runs below merged, as HeadRuns reads them) and the passes of
// [passesFrom, checkpoint), with their command state as commands says
// (a ranged lookup of a version 2 object reads its command table only
// for cmdAll, and for the last part's object for cmdLast).
// Objects cached, or with room in the cache, are read whole; the others
// by range (ranged.go), in parallel.
func (w *Window) parts(ctx context.Context, c metastore.ChainID, runsFrom, settled, merged, passesFrom, checkpoint metastore.Cursor, id format.StreamID, keep func(*format.PassStream) bool, commands cmdMode) ([]metastore.Ref, error) {
	// The runs and passes are visited one at a time (the peak is the
	// cache's budget and one object, not the window), the stream's
	// entries copied out of each.
	sw := w.newStreamWalk(id, commands)
	err := w.visit(ctx, c, runsFrom, settled, kindRun, merged, sw.get, sw.add)
	runs := len(sw.hits)
	if err == nil {
		err = w.visit(ctx, c, passesFrom, checkpoint, kindPass, metastore.Cursor{}, sw.get, sw.add)
	}
	if werr := sw.wait(); err == nil {
		err = werr
	}
	if err != nil {
		return nil, err
	}
	// Parts of one stream in later runs and passes have later seqs: the
	// first kept part starts the answer. A marker drops what came before
	// it (those seqs are behind the ref its flush wrote).
	var out []metastore.Ref
	for _, hit := range sw.hits[:runs] {
		for i := range hit.ents { // a merged run's: a marker, then a packed entry
			s := &hit.ents[i]
			if s.Marker() {
				out = slices.DeleteFunc(out, func(p metastore.Ref) bool { return p.LastSeq <= s.LastSeq })
				continue
			}
			if len(out) == 0 && !keep(s) {
				continue
			}
			out = append(out, RunRef(c, hit.obj, s))
		}
	}
	for _, hit := range sw.hits[runs:] {
		if len(hit.ents) == 0 {
			continue
		}
		s := &hit.ents[0]
		if len(out) == 0 && !keep(s) {
			continue
		}
		out = append(out, PassRef(c.Star, hit.obj.Epoch, s))
	}
	switch commands {
	case cmdNone:
		for i := range out {
			out[i].Commands = nil
		}
	case cmdLast:
		if err := w.lastCommands(ctx, sw.hits, out); err != nil {
			return nil, fmt.Errorf("chain %s: stream %s: %w", c, id, err)
		}
	}
	return out, nil
}

// RunRef is the packed entry s of run r of chain c as a ref: as PassRef,
// with settled locations in the run's packs (a merged run's when r.Merged).
func RunRef(c metastore.ChainID, r *format.PassIndex, s *format.PassStream) metastore.Ref {
	ref := PassRef(c.Star, r.Epoch, s)
	packKey := format.PackKey
	if r.Merged {
		packKey = format.MergedPackKey
	}
	for i, g := range s.Segments {
		ref.Locations[i].Settled = true
		ref.Locations[i].Key = packKey(c.Star, c.Class.String(), r.Epoch, r.FirstSlot, r.EndSlot, r.Digest, g.Slot)
	}
	return ref
}

// PassRef is stream part s of a pass of epoch as a ref: its seqs,
// timestamps, bytes, one transit location per segment, its marks, its
// command state and its carried table.
func PassRef(star string, epoch uint64, s *format.PassStream) metastore.Ref {
	r := metastore.Ref{StreamID: s.Stream.String(), FirstSeq: s.FirstSeq, LastSeq: s.LastSeq,
		FirstTsMs: s.FirstTsMs, LastTsMs: s.LastTsMs, Bytes: s.Bytes,
		Locations: make([]metastore.Location, len(s.Segments))}
	for i, g := range s.Segments {
		r.Locations[i] = metastore.Location{Key: format.SlotKey(star, epoch, g.Slot), Offset: int64(g.Offset), Length: int64(g.Length), FirstSeq: g.FirstSeq}
	}
	for _, m := range s.Marks {
		r.Producers = append(r.Producers, metastore.ProducerMark{Producer: m.Producer, BatchSeq: m.BatchSeq, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq})
	}
	if s.Commands != nil {
		c := *s.Commands
		r.Commands = &c
	}
	r.Carried, r.CarriedBelow = metastore.FromPassMarks(s.Carried), s.CarriedBelow
	return r
}

// StreamRefs returns the parts of stream st in the pass indexes of its
// chain's window [Settled, Checkpoint), read from the chain's head, that
// end at or after fromSeq: one GetHead per call, plus one GET per pass not
// yet cached (a few ranged GETs when the cache has no room for it). A
// pass index that vanished under it (settle moved past it and trim
// deleted it between the head and the GET) re-reads the head,
// up to three times.
func (w *Window) StreamRefs(ctx context.Context, st metastore.Stream, fromSeq uint64) ([]metastore.Ref, error) {
	return w.streamRefs(ctx, st, fromSeq, cmdAll)
}

// StreamParts is StreamRefs without command state (HeadParts): what
// trim's deletion check needs (whether the window still holds parts).
func (w *Window) StreamParts(ctx context.Context, st metastore.Stream, fromSeq uint64) ([]metastore.Ref, error) {
	return w.streamRefs(ctx, st, fromSeq, cmdNone)
}

// streamRefs is StreamRefs, with command state as commands says.
func (w *Window) streamRefs(ctx context.Context, st metastore.Stream, fromSeq uint64, commands cmdMode) ([]metastore.Ref, error) {
	id, err := format.ParseStreamID(st.ID)
	if err != nil {
		return nil, fmt.Errorf("passindex: pass index of %s: %w", st.Name, err)
	}
	refs, err := w.chainRefs(ctx, st, metastore.ChainID{Star: st.Star, Class: st.Class}, id, fromSeq, commands)
	if err != nil || st.From == "" || st.From == st.Star {
		return refs, err
	}
	// A moved stream (ADR 0065): the star it left may still hold its older
	// parts in its window until settle flushes them into refs.
	old, err := w.chainRefs(ctx, st, metastore.ChainID{Star: st.From, Class: st.Class}, id, fromSeq, commands)
	if err != nil || len(old) == 0 {
		return refs, err
	}
	refs = append(old, refs...)
	slices.SortStableFunc(refs, func(a, b metastore.Ref) int { return cmp.Compare(a.FirstSeq, b.FirstSeq) })
	return refs, nil
}

// chainRefs is streamRefs in the window of chain c.
func (w *Window) chainRefs(ctx context.Context, st metastore.Stream, c metastore.ChainID, id format.StreamID, fromSeq uint64, commands cmdMode) ([]metastore.Ref, error) {
	for attempt := 0; ; attempt++ {
		h, err := w.Meta.GetHead(ctx, c)
		if errors.Is(err, metastore.ErrNotFound) {
			return nil, nil // never minted: nothing absorbed
		}
		if err != nil {
			return nil, fmt.Errorf("passindex: pass index of %s: %w", st.Name, err)
		}
		w.pruneTo(c, h)
		refs, err := w.windowRefs(ctx, c, h, id, func(s *format.PassStream) bool { return s.LastSeq >= fromSeq }, commands)
		if errors.Is(err, objstore.ErrNotFound) && attempt < 3 {
			continue
		}
		return refs, err
	}
}

// QueryRefs is metastore.QueryRefs of st followed, where its refs end, by
// its parts in the window (StreamRefs): refs hold what settle moved, the
// window what the absorb indexed since, so the parts continue the refs.
// The window is read after the refs: a part that settle moved into a ref
// in between is then missing from both, which callers see as a hole (a
// torn view, read again), never as a skipped seq. The window's parts
// carry no command state (HeadParts): readers and RecoverStream's mark
// chain do not read it; LastRef has it.
func (w *Window) QueryRefs(ctx context.Context, st metastore.Stream, from uint64, limit int) ([]metastore.Ref, error) {
	refs, err := w.Meta.QueryRefs(ctx, st.ID, from, limit)
	if err == nil && moved(st) {
		return w.movedRefs(ctx, st, from, limit, refs)
	}
	if err != nil || len(refs) > 0 {
		// A page of refs, full or cut short at DynamoDB's 1 MB: more refs
		// may follow it, so the window is read only once the refs from
		// here are exhausted (an empty page), never appended after a short
		// page (which would skip the refs it left out).
		return refs, err
	}
	parts, err := w.streamRefs(ctx, st, from, cmdNone)
	if err != nil {
		return nil, err
	}
	return parts[:min(len(parts), limit)], nil
}

// LastRef is st's last part in the window, or else its last ref
// (metastore.ErrNotFound when it has neither): the window is read first,
// so a part settle moves meanwhile is found in the refs.
func (w *Window) LastRef(ctx context.Context, st metastore.Stream) (metastore.Ref, error) {
	parts, err := w.streamRefs(ctx, st, 0, cmdLast)
	if err != nil {
		return metastore.Ref{}, err
	}
	if len(parts) > 0 && !moved(st) {
		return parts[len(parts)-1], nil
	}
	last, err := w.Meta.LastRef(ctx, st.ID)
	if len(parts) > 0 && (errors.Is(err, metastore.ErrNotFound) || err == nil && parts[len(parts)-1].LastSeq > last.LastSeq) {
		// A moved stream's window parts may be older than its refs: the
		// chain it moved to may have settled before the one it left.
		return parts[len(parts)-1], nil
	}
	return last, err
}

// moved reports whether st's parts may be in two chains' windows (ADR
// 0065): settle flushes each chain on its own, so refs may then hold
// later seqs than a window part, and the window's parts no longer simply
// continue the refs.
func moved(st metastore.Stream) bool { return st.From != "" && st.From != st.Star }

// movedRefs is QueryRefs of a moved stream: its refs from the page read
// and its parts in both windows (read after the refs, as QueryRefs does),
// in seq order, a part that overlaps a ref left out (settle moved it
// meanwhile). When the page of refs is full, nothing past its last ref
// is returned: later refs may follow it.
func (w *Window) movedRefs(ctx context.Context, st metastore.Stream, from uint64, limit int, refs []metastore.Ref) ([]metastore.Ref, error) {
	parts, err := w.streamRefs(ctx, st, from, cmdNone)
	if err != nil {
		return nil, err
	}
	full := len(refs) >= limit && len(refs) > 0
	all := append(slices.Clone(refs), parts...) // refs first: they win ties
	slices.SortStableFunc(all, func(a, b metastore.Ref) int { return cmp.Compare(a.FirstSeq, b.FirstSeq) })
	out := all[:0]
	for _, r := range all {
		if len(out) > 0 && r.FirstSeq <= out[len(out)-1].LastSeq {
			continue
		}
		if full && r.FirstSeq > refs[len(refs)-1].LastSeq {
			break
		}
		out = append(out, r)
	}
	return out[:min(len(out), limit)], nil
}

// ForStream is the window's refs of st in the shape star.RecoverStream
// reads (its streamID arguments are st's id).
func (w *Window) ForStream(st metastore.Stream) StreamRefs { return StreamRefs{w: w, st: st} }

// StreamRefs is one stream's refs and window parts (Window.ForStream).
type StreamRefs struct {
	w  *Window
	st metastore.Stream
}

// LastRef implements star.RefReader.
func (s StreamRefs) LastRef(ctx context.Context, streamID string) (metastore.Ref, error) {
	if streamID != s.st.ID {
		return metastore.Ref{}, fmt.Errorf("passindex: window refs of %s asked for %s: %w", s.st.ID, streamID, metastore.ErrInvalid)
	}
	return s.w.LastRef(ctx, s.st)
}

// QueryRefs implements star.RefReader.
func (s StreamRefs) QueryRefs(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	if streamID != s.st.ID {
		return nil, fmt.Errorf("passindex: window refs of %s asked for %s: %w", s.st.ID, streamID, metastore.ErrInvalid)
	}
	return s.w.QueryRefs(ctx, s.st, fromSeq, limit)
}

// RefsBefore implements star.RefReader.
func (s StreamRefs) RefsBefore(ctx context.Context, streamID string, beforeSeq uint64, limit int) ([]metastore.Ref, error) {
	if streamID != s.st.ID {
		return nil, fmt.Errorf("passindex: window refs of %s asked for %s: %w", s.st.ID, streamID, metastore.ErrInvalid)
	}
	return s.w.RefsBefore(ctx, s.st, beforeSeq, limit)
}

// RefsBefore is st's parts in the window and its refs that start before
// beforeSeq, newest first, at most limit: the window read first (as
// LastRef), then one page of refs (metastore.Store.RefsBefore). A part
// that settle flushed meanwhile is in both (they overlap: callers union
// their marks). When the page holds refs, no part older than its oldest
// ref is returned: older refs may precede it, and the next page (before
// that ref) returns them with those parts in order. A moved stream's parts
// may be older than its refs; they interleave by seq.
func (w *Window) RefsBefore(ctx context.Context, st metastore.Stream, beforeSeq uint64, limit int) ([]metastore.Ref, error) {
	if err := metastore.ValidateLimit(limit); err != nil {
		return nil, err
	}
	parts, err := w.streamRefs(ctx, st, 0, cmdNone)
	if err != nil {
		return nil, err
	}
	refs, err := w.Meta.RefsBefore(ctx, st.ID, beforeSeq, limit)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(refs)
	for _, p := range parts {
		if p.FirstSeq < beforeSeq && (len(refs) == 0 || p.FirstSeq >= refs[len(refs)-1].FirstSeq) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b metastore.Ref) int { return cmp.Compare(b.FirstSeq, a.FirstSeq) })
	return out[:min(len(out), limit)], nil
}

// ChainsLookup is what the garbage probe's orphan report reads for a
// stream (probe.RefLookup) when the absorb writes pass indexes: the
// stream's parts in the windows of chains, runs and passes alike, as
// transit locations (a settle step may still write refs to objects
// overlapping them, a flush for a run's), then its refs,
// sorted by seq, at most limit. The windows are read before the refs, so
// parts a settle step moves meanwhile are in the refs: a view where an
// object seems unreferenced and out of every window is never torn.
func (w *Window) ChainsLookup(chains []metastore.ChainID) func(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
	return func(ctx context.Context, streamID string, fromSeq uint64, limit int) ([]metastore.Ref, error) {
		id, err := format.ParseStreamID(streamID)
		if err != nil {
			return nil, nil // never stored
		}
		var out []metastore.Ref
		for _, c := range chains {
			var parts []metastore.Ref
			for attempt := 0; ; attempt++ {
				h, err := w.Meta.GetHead(ctx, c)
				if errors.Is(err, metastore.ErrNotFound) {
					break
				}
				if err != nil {
					return nil, fmt.Errorf("passindex: window of chain %s: %w", c, err)
				}
				w.pruneTo(c, h)
				parts, err = w.HeadParts(ctx, c, h, id, fromSeq)
				// An object trim deleted under a stale head (more likely
				// once the cache may have evicted it: refetched, not
				// served from memory): re-read the head, as StreamRefs.
				if errors.Is(err, objstore.ErrNotFound) && attempt < 3 {
					continue
				}
				if err != nil {
					return nil, err
				}
				break
			}
			// Runs' parts are in packs (settled locations), but a flush may
			// still write a per-stream object for their seqs and a ref to
			// it: to the probe every window part is in transit.
			for i := range parts {
				parts[i].Locations = slices.Clone(parts[i].Locations)
				for j := range parts[i].Locations {
					parts[i].Locations[j].Settled = false
				}
			}
			out = append(out, parts...)
		}
		refs, err := w.Meta.QueryRefs(ctx, streamID, fromSeq, limit)
		if err != nil {
			return nil, err
		}
		if len(refs) > 0 {
			// The page may be cut short (DynamoDB's 1 MB): refs after it
			// are unread, so window parts past its end wait for a later
			// page, else the caller, going on after the last part, would
			// skip those refs and call their objects orphans.
			end := refs[len(refs)-1].LastSeq
			out = slices.DeleteFunc(out, func(p metastore.Ref) bool { return p.FirstSeq > end })
		}
		out = append(out, refs...)
		slices.SortStableFunc(out, func(a, b metastore.Ref) int { return cmp.Compare(a.FirstSeq, b.FirstSeq) })
		return out[:min(len(out), limit)], nil
	}
}
