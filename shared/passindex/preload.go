package passindex

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// DefaultColdLoadParallel is the GETs a cold load keeps in flight
// (Window.Parallel) where the node and settle set it.
const DefaultColdLoadParallel = 16

// preload is the cold load of a walk (Window.Parallel > 0, design
// 014 "Level 2 as built"): the first walk of chain c's indexes of kind in
// this window lists their keys (one LIST: runs and merged runs of every
// epoch under one prefix each, passes per epoch) and GETs those that
// start in [from, to), Parallel at a time, into the cache, so the walk
// that follows finds them cached instead of fetching one at a time. Best
// effort: a LIST that fails (no permission) or a GET that fails leaves
// the walk to fetch what is missing (and report the error).
func (w *Window) preload(ctx context.Context, c metastore.ChainID, kind indexKind, from, to metastore.Cursor) {
	if w.Parallel <= 0 || !from.Less(to) {
		return
	}
	w.mu.Lock()
	if w.loaded == nil {
		w.loaded = map[passAt]bool{}
	}
	k := passAt{c: c, kind: kind}
	done := w.loaded[k]
	w.loaded[k] = true
	w.mu.Unlock()
	if done {
		return
	}
	w.load(ctx, c, kind, from, to)
}

// MissesBeforeReload: a walk whose window was loaded once and that then
// misses this many objects in a row (passes a burst wrote since, a
// reader catching up) lists and loads the rest of its range in parallel
// (load), once per walk, instead of fetching it one GET at a time.
const MissesBeforeReload = 4

// load lists chain c's indexes of kind and GETs those that start in
// [from, to) and are not cached, Parallel at a time (preload's body,
// without its once-per-window flag).
func (w *Window) load(ctx context.Context, c metastore.ChainID, kind indexKind, from, to metastore.Cursor) {
	type listing struct {
		prefix string
		epoch  uint64 // of a pass prefix
	}
	var prefixes []listing
	keyOf := func(e, slot uint64) string { return format.PassIndexKey(c.Star, c.Class.String(), e, slot) }
	switch kind {
	case kindRun:
		keyOf = func(e, slot uint64) string { return format.RunIndexKey(c.Star, c.Class.String(), e, slot) }
	case kindMerged:
		keyOf = func(e, slot uint64) string { return format.MergedRunKey(c.Star, c.Class.String(), e, slot) }
	}
	if kind == kindPass {
		for e := from.Epoch; e <= to.Epoch; e++ {
			p := keyOf(e, 0)
			prefixes = append(prefixes, listing{p[:len(p)-20], e})
		}
	} else {
		p := keyOf(0, 0)
		prefixes = append(prefixes, listing{prefix: p[:len(p)-41]})
	}
	var want []metastore.Cursor
	for _, l := range prefixes {
		keys, err := w.Bucket.List(ctx, l.prefix)
		if err != nil {
			return // the walk fetches one at a time
		}
		for _, key := range keys {
			at, ok := cursorOfKey(strings.TrimPrefix(key, l.prefix), kind)
			if kind == kindPass {
				at.Epoch = l.epoch
			}
			if !ok || keyOf(at.Epoch, at.Slot) != key || at.Less(from) || !at.Less(to) {
				continue
			}
			if !w.has(passAt{c, at, kind}) {
				want = append(want, at)
			}
		}
	}
	// The load stops before what it fetches would overfill the cache's
	// room (the budget less what is cached): past it, objects would evict
	// those loaded first, which the walk needs first; the walk fetches the
	// rest. Each object's size is learnt first from its header (a 48-byte
	// ranged GET, all of them Parallel at a time), so that nothing is
	// fetched whole that will not fit: an object is claimed in walk order
	// at its decoded size (from the header's counts) plus its encoded
	// size while it is fetched and decoded, and the claims never pass the
	// room. (Before, the first Parallel GETs went out before any size was
	// known: at 1,000,000 streams, 16 runs of about 100 MB encoded and
	// 144 MB decoded each, far past a settle Lambda's budget.)
	w.mu.Lock()
	room := w.budget() - w.bytes
	w.mu.Unlock()
	headers := make([]format.PassHeader, len(want))
	ok := make([]bool, len(want))
	var wg sync.WaitGroup
	sem := make(chan struct{}, w.Parallel)
	for i, at := range want {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			h, _, err := w.getHeader(ctx, c, at, kind)
			headers[i], ok[i] = h, err == nil // a failure: the walk reports it
		}()
	}
	wg.Wait()
	var claimed atomic.Int64
	for i, at := range want {
		if !ok[i] {
			break // the walk meets it in order; load nothing past it
		}
		decoded := headers[i].DecodedBytes(allocObject+sizeIndex, sizeStream, sizeSegment, sizeMark)
		encoded := headers[i].FixedSize()
		sem <- struct{}{} // first: the claims then count what finished meanwhile
		if claimed.Add(decoded+encoded) > room {
			claimed.Add(-decoded - encoded)
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			p, err := w.get(ctx, c, at, kind) // cached; the walk reports failures
			if err != nil {
				claimed.Add(-decoded - encoded)
				return
			}
			claimed.Add(DecodedBytes(p) - decoded - encoded) // fetched and decoded: only the object stays
		}()
	}
	wg.Wait()
}

// cursorOfKey parses a listed key's tail after its prefix: the first
// slot of a pass (one number), or the epoch and first slot of a run or
// merged run.
func cursorOfKey(tail string, kind indexKind) (metastore.Cursor, bool) {
	parts := strings.Split(tail, "/")
	if kind == kindPass {
		if len(parts) != 1 {
			return metastore.Cursor{}, false
		}
		slot, err := strconv.ParseUint(parts[0], 10, 64)
		return metastore.Cursor{Slot: slot}, err == nil
	}
	if len(parts) != 2 {
		return metastore.Cursor{}, false
	}
	e, err1 := strconv.ParseUint(parts[0], 10, 64)
	slot, err2 := strconv.ParseUint(parts[1], 10, 64)
	return metastore.Cursor{Epoch: e, Slot: slot}, err1 == nil && err2 == nil
}
