package absorb

import (
	"container/list"
	"math"
	"unsafe"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metrics"
)

// DefaultWindowCacheBytes is IndexWindow.MaxBytes's default: what a
// 256 MiB Lambda (trim, probe) can hold beside its work. The node and the
// settle Lambda set their own (design 014, "Window memory bound").
const DefaultWindowCacheBytes = 64 << 20

// Sizes the estimate of DecodedBytes counts: a heap object's header is
// not counted by unsafe.Sizeof; allocObject is a per-allocation allowance
// (size-class rounding, the map entry and list element of the cache).
var (
	sizeIndex    = int64(unsafe.Sizeof(format.PassIndex{}))
	sizeStream   = int64(unsafe.Sizeof(format.PassStream{}))
	sizeSegment  = int64(unsafe.Sizeof(format.PassSegment{}))
	sizeMark     = int64(unsafe.Sizeof(format.PassMark{}))
	sizeCommands = int64(unsafe.Sizeof(format.StreamCommands{}))
)

const allocObject = 128

// DecodedBytes estimates the heap a decoded pass index, run or merged run
// holds: its stream entries, their segments, marks and command states
// (capacities: a parsed object's slices share one array each, a built
// one's may have spare room). BenchmarkWindowMemory measures it against
// the live heap (window_bench_test.go); TestDecodedBytesEstimate keeps it
// within a factor of 1.5 either way.
func DecodedBytes(p *format.PassIndex) int64 {
	n := allocObject + sizeIndex + int64(cap(p.Streams))*sizeStream
	for i := range p.Streams {
		s := &p.Streams[i]
		n += int64(cap(s.Segments))*sizeSegment + int64(cap(s.Marks))*sizeMark
		if s.Commands != nil {
			n += sizeCommands + int64(len(s.Commands.FenceToken))
		}
	}
	return n
}

// cacheEntry is one decoded object in the window cache.
type cacheEntry struct {
	k    passAt
	p    *format.PassIndex
	size int64
}

// budget is MaxBytes resolved: 0 the default, below 0 unbounded.
func (w *IndexWindow) budget() int64 {
	switch {
	case w.MaxBytes == 0:
		return DefaultWindowCacheBytes
	case w.MaxBytes < 0:
		return math.MaxInt64
	}
	return w.MaxBytes
}

// room is what the cache may still take before it evicts.
func (w *IndexWindow) room() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.budget() - w.bytes
}

// lookup returns the cached object at k (nil: none) and marks it used.
// w.mu is held.
func (w *IndexWindow) lookupLocked(k passAt) *format.PassIndex {
	el := w.cache[k]
	if el == nil {
		return nil
	}
	w.lru.MoveToFront(el)
	return el.Value.(*cacheEntry).p
}

// has reports whether k is cached, without marking it used.
func (w *IndexWindow) has(k passAt) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cache[k] != nil
}

// store caches p at k within the budget: an object larger than the whole
// budget is not cached (the caller uses it and drops it); otherwise the
// least recently used objects are evicted until it fits. An object that
// enters a cache with room is put at the recent end; one that needed an
// eviction is put at the cold end, and moves to the recent end on its
// next use. That keeps a walk over a window larger than the budget from
// evicting, object by object, everything the next walk needs first
// (plain LRU under a cyclic scan hits nothing): a budget's worth stays
// cached, and a walk refetches the rest.
func (w *IndexWindow) store(k passAt, p *format.PassIndex) {
	size := DecodedBytes(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cache == nil {
		w.cache = map[passAt]*list.Element{}
	}
	if el := w.cache[k]; el != nil {
		w.removeLocked(el)
	}
	max := w.budget()
	if size > max {
		return
	}
	evicted := false
	for w.bytes+size > max {
		w.removeLocked(w.lru.Back())
		w.evicted++
		evicted = true
	}
	e := &cacheEntry{k: k, p: p, size: size}
	if evicted {
		w.cache[k] = w.lru.PushBack(e)
	} else {
		w.cache[k] = w.lru.PushFront(e)
	}
	w.bytes += size
}

func (w *IndexWindow) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	w.lru.Remove(el)
	delete(w.cache, e.k)
	w.bytes -= e.size
}

// WindowStats is what an IndexWindow's cache holds and has done.
type WindowStats struct {
	Objects int   // decoded objects cached
	Bytes   int64 // their DecodedBytes
	Gets    int64 // objects fetched by GET (every miss, the cold load's)
	Evicted int64 // objects evicted for room (not counting Prune's)
}

// Register exports the cache's figures on reg: its bytes and objects,
// its budget, and the GETs and evictions so far.
func (w *IndexWindow) Register(reg *metrics.Registry) {
	reg.GaugeFunc("strand_window_cache_bytes", "Decoded pass index window objects the cache holds, in bytes (estimated; design 014, window memory bound).", func() float64 { return float64(w.Stats().Bytes) })
	reg.GaugeFunc("strand_window_cache_objects", "Pass index window objects (pass indexes, runs, merged runs) the cache holds.", func() float64 { return float64(w.Stats().Objects) })
	reg.GaugeFunc("strand_window_cache_budget_bytes", "The window cache's byte budget (--window-cache-mib; -1: unbounded).", func() float64 { return float64(w.Budget()) })
	reg.CounterFunc("strand_window_cache_gets_total", "Window objects fetched by GET: cold loads and misses. Rising steadily with a full cache: the budget is below the window (docs/operations.md, sizing the window cache).", func() float64 { return float64(w.Stats().Gets) })
	reg.CounterFunc("strand_window_cache_evictions_total", "Window objects evicted for room.", func() float64 { return float64(w.Stats().Evicted) })
}

// Stats returns the cache's figures.
func (w *IndexWindow) Stats() WindowStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WindowStats{Objects: len(w.cache), Bytes: w.bytes, Gets: w.gets, Evicted: w.evicted}
}

// Budget is the cache's byte budget as configured: MaxBytes, its default
// for 0, and -1 for unbounded.
func (w *IndexWindow) Budget() int64 {
	if w.MaxBytes < 0 {
		return -1
	}
	return w.budget()
}
