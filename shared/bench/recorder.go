package bench

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
)

// putLog records, per chain slot key, when each copy's PutIfAbsent started
// and ended (successful copies only), for one class's bucket set. It also
// counts every chain PUT, the bytes they carried, and the bytes the
// buckets hold.
type putLog struct {
	mu     sync.Mutex
	copies map[string][]time.Duration // key -> latency of each successful copy
	sizes  map[string]int             // live objects: key -> size, per set (same in every bucket)

	puts, bytes, overFree atomic.Int64
	held                  atomic.Int64 // bytes held across the set's buckets
	freeB                 int64
}

func newPutLog(freeB int64) *putLog {
	return &putLog{copies: map[string][]time.Duration{}, sizes: map[string]int{}, freeB: freeB}
}

// wth returns the w-th smallest latency of key's successful copies.
func (p *putLog) wth(key string, w int) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.copies[key]
	if len(c) < w {
		return 0, false
	}
	c = slices.Clone(c)
	slices.Sort(c)
	return c[w-1], true
}

// forget drops key's latencies (after the floor was computed).
func (p *putLog) forget(key string) {
	p.mu.Lock()
	delete(p.copies, key)
	p.mu.Unlock()
}

// recording wraps one bucket of a set and records into the set's putLog.
type recording struct {
	objstore.Bucket
	log *putLog
}

var _ objstore.Bucket = (*recording)(nil)

// countingPuts counts the PUTs of a bucket (the pass indexes the absorb
// puts in the settled bucket).
type countingPuts struct {
	objstore.Bucket
	n *atomic.Int64 // pass indexes (index/<star>/<class>/<epoch>/...)
	// settle counts the other PUTs (settle's: run indexes, packs and
	// per-stream settled objects) and LISTs (trim's), nil: into n.
	settle *atomic.Int64
}

var (
	_ objstore.Bucket     = (*countingPuts)(nil)
	_ objstore.ReaderInto = (*countingPuts)(nil)
	_ objstore.Keeper     = (*countingPuts)(nil)
	_ objstore.Viewer     = (*countingPuts)(nil)
	_ objstore.Viewer     = (*recording)(nil)
)

// View forwards to the bucket's own View (objstore.Viewer): counting
// PUTs changes no GET.
func (c *countingPuts) View(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return objstore.View(ctx, c.Bucket, key, off, n)
}

// View forwards to the bucket's own View (objstore.Viewer): recording
// PUTs changes no GET.
func (r *recording) View(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return objstore.View(ctx, r.Bucket, key, off, n)
}

func (c *countingPuts) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	c.count(key)
	return c.Bucket.PutIfAbsent(ctx, key, body)
}

// KeepIfAbsent counts the put and gives body on (objstore.PutGiven): the
// pass indexes and command indexes given to the bucket are kept, not
// copied (settle's objects and packs are lent, PutIfAbsent: ADR 0072).
func (c *countingPuts) KeepIfAbsent(ctx context.Context, key string, body []byte) error {
	c.count(key)
	return objstore.PutGiven(ctx, c.Bucket, key, body)
}

func (c *countingPuts) count(key string) {
	if c.settle != nil && (!strings.HasPrefix(key, "index/") || strings.Contains(key, "/runs/")) {
		c.settle.Add(1)
	} else {
		c.n.Add(1)
	}
}

// GetInto forwards to the bucket's own GetInto (objstore.ReaderInto):
// counting PUTs changes no GET, and without it every settled read in the
// bench's pass-index runs paid a copy no real bucket does (the API
// catch-up measured 22% more CPU per GiB than refs for it).
func (c *countingPuts) GetInto(ctx context.Context, key string, off int64, dst []byte) (int, error) {
	return objstore.GetInto(ctx, c.Bucket, key, off, dst)
}

// List counts as a settle request (S3 prices a LIST as a PUT).
func (c *countingPuts) List(ctx context.Context, prefix string) ([]string, error) {
	if c.settle != nil {
		c.settle.Add(1)
	}
	return c.Bucket.List(ctx, prefix)
}

// isChain: every PUT but the star's start-up conditional-write probe.
func isChain(key string) bool { return !strings.HasPrefix(key, "probes/") }

// PutIfAbsent times the call (the fault wrapper's latency is inside, and
// the memory bucket's copy inside that: SetPutLatencyCoversCall).
func (r *recording) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	start := time.Now()
	err := r.Bucket.PutIfAbsent(ctx, key, body)
	took := time.Since(start)
	if !isChain(key) {
		return err
	}
	r.log.puts.Add(1)
	r.log.bytes.Add(int64(len(body)))
	r.log.overFree.Add(max(0, int64(len(body))-r.log.freeB))
	if err == nil {
		r.log.held.Add(int64(len(body)))
		r.log.mu.Lock()
		r.log.copies[key] = append(r.log.copies[key], took)
		r.log.sizes[key] = len(body)
		r.log.mu.Unlock()
	}
	return err
}

// Delete removes key and stops counting its bytes.
func (r *recording) Delete(ctx context.Context, key string) error {
	r.log.mu.Lock()
	size, ok := r.log.sizes[key]
	r.log.mu.Unlock()
	err := r.Bucket.Delete(ctx, key)
	if err == nil && ok {
		r.log.held.Add(-int64(size))
	}
	return err
}

// span is the bytes of one copy of the chain slots [from, to) of star's
// epoch, as written (0 for a slot never written).
func (l *putLog) span(star string, epoch, from, to uint64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for s := from; s < to; s++ {
		n += int64(l.sizes[format.SlotKey(star, epoch, s)])
	}
	return n
}
