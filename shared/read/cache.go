package read

import (
	"container/list"
	"context"
	"sync"
	"unsafe"

	"github.com/strandlog/strand/shared/format"
)

// DefaultCacheBytes is the size of a Reader's segment cache when it is
// given none (Reader.Cache).
const DefaultCacheBytes = 64 << 20

// SegmentCache is the decoded segments fetched by all the sessions (and
// reads) of a server, shared: readers of one stream that reach the same
// location take it from here instead of fetching it again, and concurrent
// readers that want a location no one has yet fetch it once (single
// flight: the first starts the GET, the others wait for it).
//
// A location is keyed by its stream and its object key and byte range;
// the bytes at a key and range never change (a chain slot and a settled
// object are written once), so an entry never goes stale: once its object
// is trimmed or replaced, no ref names it any more, and the read, which
// only loads the locations of the refs it has just queried, never asks
// for it again; it leaves at the next evictions.
//
// The cache holds at most its size in finished entries (each counted as
// its encoded bytes plus its decoded record headers), evicting the least
// recently used; a location larger than the whole cache is served to its
// waiters and not kept. Fetches in flight are not counted: the sessions'
// Budget bounds them. The cache's memory is beside the Budget's (an entry
// a session holds is counted in both, the same bytes once in memory).
type SegmentCache struct {
	max int64

	mu      sync.Mutex
	size    int64 // of the entries in lru
	m       map[cacheKey]*centry
	lru     list.List // finished entries, most recently used first
	metrics CacheStats
}

// CacheStats count a cache's work.
type CacheStats struct {
	Hits    int64 // served from a finished entry
	Joined  int64 // waited on a fetch another reader started
	Fetches int64 // fetches started
	Evicted int64 // entries evicted for room
	Bytes   int64 // held now
	Entries int   // held now
}

type cacheKey struct {
	id  format.StreamID
	loc locKey
}

type centry struct {
	done chan struct{}
	info format.SegmentInfo
	recs []format.Record
	err  error
	// under SegmentCache.mu: waiters of the fetch in flight; elem, once
	// finished and kept; size, its count.
	waiters int
	cancel  context.CancelFunc
	elem    *list.Element
	key     cacheKey
	size    int64
}

// NewSegmentCache returns a cache of at most maxBytes of decoded segments
// (0 or less: nothing is kept, fetches are still shared while in flight).
func NewSegmentCache(maxBytes int64) *SegmentCache {
	return &SegmentCache{max: maxBytes, m: map[cacheKey]*centry{}}
}

// Stats returns the cache's counters.
func (c *SegmentCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.metrics
	s.Bytes, s.Entries = c.size, c.lru.Len()
	return s
}

// segmentSize is what an entry counts: its encoded bytes and its records'
// headers.
func segmentSize(length int64, recs []format.Record) int64 {
	return length + int64(len(recs))*int64(unsafe.Sizeof(format.Record{}))
}

// get returns k's decoded segment: cached, or fetched once for all the
// callers that want it meanwhile. The fetch runs in a context of its own,
// with ctx's values, that is cancelled when every caller waiting on it has
// gone (a caller that comes later starts afresh). A failed fetch is not
// kept.
func (c *SegmentCache) get(ctx context.Context, k cacheKey, fetch func(context.Context) (format.SegmentInfo, []format.Record, error)) (format.SegmentInfo, []format.Record, error) {
	c.mu.Lock()
	e := c.m[k]
	switch {
	case e != nil && e.elem != nil:
		c.lru.MoveToFront(e.elem)
		c.metrics.Hits++
		c.mu.Unlock()
		return e.info, e.recs, nil
	case e != nil:
		c.metrics.Joined++
	default:
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		e = &centry{done: make(chan struct{}), cancel: cancel, key: k}
		c.m[k] = e
		c.metrics.Fetches++
		go c.run(fctx, e, fetch)
	}
	e.waiters++
	c.mu.Unlock()
	select {
	case <-e.done:
		c.mu.Lock()
		e.waiters--
		c.mu.Unlock()
		return e.info, e.recs, e.err
	case <-ctx.Done():
		c.mu.Lock()
		e.waiters--
		if e.waiters == 0 && c.m[k] == e && e.elem == nil {
			// Nobody wants it any more: stop the fetch; it is not kept.
			delete(c.m, k)
			e.cancel()
		}
		c.mu.Unlock()
		return format.SegmentInfo{}, nil, ctx.Err()
	}
}

func (c *SegmentCache) run(ctx context.Context, e *centry, fetch func(context.Context) (format.SegmentInfo, []format.Record, error)) {
	info, recs, err := fetch(ctx)
	e.cancel()
	c.mu.Lock()
	e.info, e.recs, e.err = info, recs, err
	if c.m[e.key] == e {
		if size := segmentSize(e.key.loc.length, recs); err != nil || size > c.max {
			delete(c.m, e.key)
		} else {
			e.size = size
			e.elem = c.lru.PushFront(e)
			c.size += size
			for c.size > c.max {
				old := c.lru.Remove(c.lru.Back()).(*centry)
				delete(c.m, old.key)
				c.size -= old.size
				c.metrics.Evicted++
			}
		}
	}
	c.mu.Unlock()
	close(e.done)
}
