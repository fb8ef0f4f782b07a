package passindex

import (
	"container/list"
	"math"
	"unsafe"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metrics"
)

// DefaultWindowCacheBytes is Window.MaxBytes's default: what a
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
// holds: its stream entries, their segments, marks (own and carried) and
// command states (capacities: a parsed object's slices share one array
// each, a built one's may have spare room). BenchmarkWindowMemory measures it against
// the live heap (window_bench_test.go); TestDecodedBytesEstimate keeps it
// within a factor of 1.5 either way.
func DecodedBytes(p *format.PassIndex) int64 {
	n := allocObject + sizeIndex + int64(cap(p.Streams))*sizeStream
	for i := range p.Streams {
		s := &p.Streams[i]
		n += int64(cap(s.Segments))*sizeSegment + int64(cap(s.Marks)+cap(s.Carried))*sizeMark
		if s.Commands != nil {
			n += sizeCommands + int64(len(s.Commands.FenceToken))
		}
	}
	return n
}

// cacheEntry is one decoded object in the window cache.
type cacheEntry struct {
	k   passAt
	p   *format.PassIndex  // a header's: its epoch and slots alone
	h   *format.PassHeader // set for a header alone (kindHeader)
	dir *rangedDir         // and its sparse directory (ranged.go)
	// decoded is the object's DecodedBytes once a lookup fetched it
	// whole and found no room for it (0: not known).
	decoded int64
	size    int64
}

// budget is MaxBytes resolved: 0 the default, below 0 unbounded.
func (w *Window) budget() int64 {
	switch {
	case w.MaxBytes == 0:
		return DefaultWindowCacheBytes
	case w.MaxBytes < 0:
		return math.MaxInt64
	}
	return w.MaxBytes
}

// room is what the cache may still take before it evicts.
func (w *Window) room() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.budget() - w.bytes
}

// lookup returns the cached object at k (nil: none) and marks it used.
// w.mu is held.
func (w *Window) lookupLocked(k passAt) *format.PassIndex {
	el := w.cache[k]
	if el == nil {
		return nil
	}
	w.lru.MoveToFront(el)
	return el.Value.(*cacheEntry).p
}

// has reports whether k is cached, without marking it used.
func (w *Window) has(k passAt) bool {
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
func (w *Window) store(k passAt, p *format.PassIndex, size int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cache == nil {
		w.cache = map[passAt]*list.Element{}
	}
	if el := w.cache[k]; el != nil {
		w.removeLocked(el)
	}
	if el := w.cache[passAt{k.c, k.at, k.kind | kindHeader}]; el != nil {
		w.removeLocked(el) // the object supersedes its header
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

// headerSize is what a cached header counts against the budget, its
// sparse directory full.
var headerSize = 3*allocObject + sizeIndex + int64(unsafe.Sizeof(format.PassHeader{})+unsafe.Sizeof(rangedDir{})) + dirPoints*int64(unsafe.Sizeof(dirPoint{}))

// storeWithin caches p (of DecodedBytes size) at k if it fits beside
// what is cached and the header reserve, without evicting anything (a
// per-stream lookup's whole fetch, ranged.go); else it caches p's header
// with its size, so that the next lookup reads it by range.
func (w *Window) storeWithin(k passAt, p *format.PassIndex, size int64, h format.PassHeader) {
	w.mu.Lock()
	fits := w.bytes+size <= w.budget()-w.budget()/headerReserve
	w.mu.Unlock()
	if fits {
		w.store(k, p, size)
		return
	}
	w.storeHeader(k, h, size)
}

// storeHeader caches the header h of the object at k (k.kind without
// kindHeader), with an empty sparse directory and the object's decoded
// size when known (else 0), when the cache has room for it without
// evicting anything: a per-stream lookup past the budget then skips the
// header's GET. It returns the directory cached with the header (nil:
// not cached).
func (w *Window) storeHeader(k passAt, h format.PassHeader, decoded int64) *rangedDir {
	k.kind |= kindHeader
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cache == nil {
		w.cache = map[passAt]*list.Element{}
	}
	if el := w.cache[k]; el != nil {
		e := el.Value.(*cacheEntry)
		e.decoded = max(e.decoded, decoded)
		return e.dir
	}
	if w.bytes+headerSize > w.budget() {
		return nil
	}
	e := &cacheEntry{k: k, p: &format.PassIndex{Epoch: h.Epoch, FirstSlot: h.FirstSlot, EndSlot: h.EndSlot, Digest: h.Digest}, h: &h, dir: &rangedDir{}, decoded: decoded, size: headerSize}
	w.cache[k] = w.lru.PushFront(e)
	w.bytes += headerSize
	w.headers++
	return e.dir
}

func (w *Window) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	w.lru.Remove(el)
	delete(w.cache, e.k)
	w.bytes -= e.size
	if e.h != nil {
		w.headers--
	}
}

// WindowStats is what an Window's cache holds and has done.
type WindowStats struct {
	Objects int   // decoded objects cached
	Headers int   // headers cached alone (ranged.go)
	Bytes   int64 // their DecodedBytes and the headers' size
	Gets    int64 // objects fetched by GET (every miss, the cold load's)
	Evicted int64 // objects evicted for room (not counting Prune's)
	// GetBytes is what those whole GETs fetched.
	GetBytes int64
	// Ranged counts the objects per-stream lookups read by range (past
	// the budget, ranged.go); RangedGets and RangedBytes, their ranged
	// GETs (headers included) and the bytes those fetched.
	Ranged, RangedGets, RangedBytes int64
	// CommandTables counts the whole command tables those lookups read by
	// range; CommandIndexed, the objects whose command state they read
	// through the object's command index instead (design 014, "The
	// command index"); CommandIndexMissing, the runs found without one
	// (written by an earlier build, or a pass index read through
	// FindRanged); CommandIndexRefused, the indexes refused (of another
	// plan of the run, or corrupt: the table was read instead).
	CommandTables, CommandIndexed, CommandIndexMissing, CommandIndexRefused int64
}

// Register exports the cache's figures on reg: its bytes and objects,
// its budget, and the GETs and evictions so far.
func (w *Window) Register(reg *metrics.Registry) {
	reg.GaugeFunc("strand_window_cache_bytes", "Decoded pass index window objects the cache holds, in bytes (estimated; design 014, window memory bound).", func() float64 { return float64(w.Stats().Bytes) })
	reg.GaugeFunc("strand_window_cache_objects", "Pass index window objects (pass indexes, runs, merged runs) the cache holds.", func() float64 { return float64(w.Stats().Objects) })
	reg.GaugeFunc("strand_window_cache_headers", "Headers of window objects the cache holds alone, for per-stream lookups past the budget.", func() float64 { return float64(w.Stats().Headers) })
	reg.GaugeFunc("strand_window_cache_budget_bytes", "The window cache's byte budget (--window-cache-mib; -1: unbounded).", func() float64 { return float64(w.Budget()) })
	reg.CounterFunc("strand_window_cache_gets_total", "Window objects fetched by GET: cold loads and misses. Rising steadily with a full cache: the budget is below the window (docs/operations.md, sizing the window cache).", func() float64 { return float64(w.Stats().Gets) })
	reg.CounterFunc("strand_window_cache_evictions_total", "Window objects evicted for room.", func() float64 { return float64(w.Stats().Evicted) })
	reg.CounterFunc("strand_window_ranged_lookups_total", "Window objects a per-stream lookup read by range instead of whole (the object was not cached and the cache had no room for it; design 014, lookups past the window budget).", func() float64 { return float64(w.Stats().Ranged) })
	reg.CounterFunc("strand_window_ranged_gets_total", "Ranged GETs of window objects by per-stream lookups past the budget (headers, stream table blocks, segments, marks, command tables).", func() float64 { return float64(w.Stats().RangedGets) })
	reg.CounterFunc("strand_window_command_index_refused_total", "Command indexes (a run's .cmdx sidecar) a per-stream lookup refused: of another plan of the run, or corrupt; it read the run's whole command table instead (design 014, the command index).", func() float64 { return float64(w.Stats().CommandIndexRefused) })
	reg.CounterFunc("strand_window_command_tables_total", "Whole command tables of window objects read by range by per-stream lookups (runs without a usable command index, pass indexes, or tables cheaper than the index).", func() float64 { return float64(w.Stats().CommandTables) })
	reg.CounterFunc("strand_window_ranged_bytes_total", "Bytes fetched by ranged GETs of window objects.", func() float64 { return float64(w.Stats().RangedBytes) })
}

// Stats returns the cache's figures.
func (w *Window) Stats() WindowStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WindowStats{Objects: len(w.cache) - w.headers, Headers: w.headers, Bytes: w.bytes, Gets: w.gets, Evicted: w.evicted, GetBytes: w.getBytes,
		Ranged: w.ranged, RangedGets: w.rangedGets, RangedBytes: w.rangedBytes,
		CommandTables: w.cmdTables, CommandIndexed: w.cmdxReads, CommandIndexMissing: w.cmdxMissing, CommandIndexRefused: w.cmdxRefused}
}

// Budget is the cache's byte budget as configured: MaxBytes, its default
// for 0, and -1 for unbounded.
func (w *Window) Budget() int64 {
	if w.MaxBytes < 0 {
		return -1
	}
	return w.budget()
}
