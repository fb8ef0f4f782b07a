package objstore

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Mem is an in-memory Bucket. It honours the contract exactly:
// PutIfAbsent is one atomic LoadOrStore, and bodies are copied on the way
// in and out so no caller can alias stored bytes (but for KeepIfAbsent, whose
// caller gives its body up). It is the reference
// implementation the others are compared with, and the fastest store for
// tests.
//
// The objects are a sync.Map (a concurrent hash-trie since Go 1.24), not
// a map behind one mutex: S3 serves a key's reads and writes without
// queueing them behind every other key's, and one mutex did. In `strand
// bench` the star's chain PUTs waited in that mutex's queue behind
// hundreds of settle and absorb GETs (a lock convoy: once a waiter waits
// over a millisecond the mutex hands itself over in FIFO order, one
// goroutine wake-up per handover), which cut the default mode's ingest
// to a fraction of refs mode's (issue 36; docs/performance/ingest.md,
// "Settle in `strand bench`").
type Mem struct {
	name string
	objs sync.Map // key string -> []byte, never written once stored
	// bodies: the set's shared bodies (NewMemSet), nil for NewMem.
	bodies *bodyPool
}

var (
	_ Bucket     = (*Mem)(nil)
	_ ReaderInto = (*Mem)(nil)
	_ Keeper     = (*Mem)(nil)
	_ Viewer     = (*Mem)(nil)
)

// NewMem returns an empty in-memory bucket called name.
func NewMem(name string) *Mem {
	return &Mem{name: name}
}

// NewMemSet returns empty in-memory buckets called names that share the
// bodies they hold: a body put at a key that another bucket of the set
// holds with the same bytes is stored once (stored bodies are never
// written, and every read copies out), so the K copies of a chain slot
// that a star puts into its K buckets take one body's memory, not K
// (issue 36: in `strand bench` the buckets' memory is the process's, and
// new memory is costly on the machines it runs on; S3 keeps the copies
// out of the star's process). Each bucket honours the contract on its
// own, as NewMem's.
func NewMemSet(names ...string) []*Mem {
	p := &bodyPool{m: map[string]*pooled{}}
	out := make([]*Mem, len(names))
	for i, n := range names {
		out[i] = &Mem{name: n, bodies: p}
	}
	return out
}

// bodyPool is a NewMemSet's shared bodies: per key, the body the set's
// buckets hold and how many hold it. A bucket whose body at a key differs
// from the pooled one (another put's bytes) keeps its own copy.
type bodyPool struct {
	mu sync.Mutex
	m  map[string]*pooled
}

type pooled struct {
	b     []byte        // set, under the pool's mu, before ready closes
	n     int           // the buckets holding b at its key
	ready chan struct{} // closed once b is set
}

// share returns the pooled body of key when it holds body's bytes (one
// more holder), else a copy of body, pooled when the key has none. The
// first put of a key claims its entry before it copies, so puts of the
// same bytes arriving meanwhile wait for that one copy and share it (the
// K copies of a flight arrive together): one copy, not one per put.
func (p *bodyPool) share(key string, body []byte) []byte {
	p.mu.Lock()
	e := p.m[key]
	if e == nil {
		e = &pooled{n: 1, ready: make(chan struct{})}
		p.m[key] = e
		p.mu.Unlock()
		obj := make([]byte, len(body))
		copyYielding(obj, body)
		p.mu.Lock()
		e.b = obj
		p.mu.Unlock()
		close(e.ready)
		return obj
	}
	p.mu.Unlock()
	<-e.ready
	if bytes.Equal(e.b, body) { // compared outside the lock: e.b is never written once ready
		p.mu.Lock()
		if p.m[key] == e {
			e.n++
			p.mu.Unlock()
			return e.b
		}
		p.mu.Unlock()
		// Released meanwhile: copy, below.
	}
	obj := make([]byte, len(body))
	copyYielding(obj, body)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[key] == nil {
		ready := make(chan struct{})
		close(ready)
		p.m[key] = &pooled{b: obj, n: 1, ready: ready}
	}
	return obj
}

// release drops one holder of b at key (a bucket deleted it, or lost the
// put it was shared for).
func (p *bodyPool) release(key string, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.m[key]; e != nil && sameBody(e.b, b) {
		if e.n--; e.n == 0 {
			delete(p.m, key)
		}
	}
}

// sameBody: a and b are the same stored slice.
func sameBody(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// copyPiece is how much of a body Mem copies between two yields of the
// processor.
const copyPiece = 64 << 10

// copyYielding copies src into dst (as copy) a piece at a time, yielding
// the processor (runtime.Gosched) between pieces. A copy into memory not
// touched before costs a page fault a page, about 1 us alone and up to
// 50 us when several threads fault at once on the virtual machines the
// bench's figures come from, so a pack's 8 MiB took milliseconds in one
// memmove, which Go's scheduler cannot preempt (nor stop the world for a
// GC meanwhile): the star's goroutines in the same process (`strand
// bench`) waited behind it for a processor (issue 36).
func copyYielding(dst, src []byte) int {
	n := 0
	for n < len(src) && n < len(dst) {
		k := copy(dst[n:], src[n:min(len(src), n+copyPiece)])
		n += k
		if n < len(src) && n < len(dst) {
			gosched()
		}
	}
	return n
}

// gosched is runtime.Gosched (a variable so that a test counts yields).
var gosched = runtime.Gosched

// Name returns the bucket's name.
func (m *Mem) Name() string { return m.name }

// PutIfAbsent stores a copy of body at key unless key exists.
func (m *Mem) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	return m.put(ctx, key, body, false)
}

// KeepIfAbsent stores body itself at key unless key exists (Keeper): the
// caller gives body up. Reads still copy out, so nothing aliases it. A
// NewMemSet bucket shares or copies it as PutIfAbsent does.
func (m *Mem) KeepIfAbsent(ctx context.Context, key string, body []byte) error {
	return m.put(ctx, key, body, true)
}

func (m *Mem) put(ctx context.Context, key string, body []byte, keep bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s/%s: %w", m.name, key, err)
	}
	if _, ok := m.objs.Load(key); ok {
		return fmt.Errorf("put %s/%s: %w", m.name, key, ErrExists) // no copy for a put that loses
	}
	var obj []byte
	switch {
	case m.bodies != nil:
		obj = m.bodies.share(key, body)
	case keep:
		obj = body[:len(body):len(body)]
	default:
		obj = make([]byte, len(body))
		copyYielding(obj, body)
	}
	if _, loaded := m.objs.LoadOrStore(key, obj); loaded {
		if m.bodies != nil {
			m.bodies.release(key, obj)
		}
		return fmt.Errorf("put %s/%s: %w", m.name, key, ErrExists)
	}
	return nil
}

// Get returns a copy of n bytes of key from off (n < 0: to the end).
func (m *Mem) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := m.stored(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return slices.Clone(b), nil
}

// View returns n bytes of key from off (n < 0: to the end) as stored
// (Viewer): the caller must not write them. A stored body is never
// written, so they stay what was put.
func (m *Mem) View(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return m.stored(ctx, key, off, n)
}

// GetInto copies up to len(dst) bytes of key from off into dst.
func (m *Mem) GetInto(ctx context.Context, key string, off int64, dst []byte) (int, error) {
	b, err := m.stored(ctx, key, off, int64(len(dst)))
	if err != nil {
		return 0, err
	}
	return copy(dst, b), nil
}

// load returns the stored body of key.
func (m *Mem) load(key string) ([]byte, bool) {
	v, ok := m.objs.Load(key)
	if !ok {
		return nil, false
	}
	return v.([]byte), true
}

// stored returns the stored bytes of key in [off, off+n) (n < 0: to the
// end), aliasing the stored body (which is never written again).
func (m *Mem) stored(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", m.name, key, err)
	}
	obj, ok := m.load(key)
	if !ok {
		return nil, fmt.Errorf("get %s/%s: %w", m.name, key, ErrNotFound)
	}
	size := int64(len(obj))
	if off < 0 || off > size || (off == size && size > 0) {
		return nil, fmt.Errorf("get %s/%s at %d (size %d): %w", m.name, key, off, size, ErrRange)
	}
	end := size
	if n >= 0 && n < size-off {
		end = off + n
	}
	return obj[off:end:end], nil
}

// Head returns the size of key.
func (m *Mem) Head(ctx context.Context, key string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("head %s/%s: %w", m.name, key, err)
	}
	obj, ok := m.load(key)
	if !ok {
		return 0, fmt.Errorf("head %s/%s: %w", m.name, key, ErrNotFound)
	}
	return int64(len(obj)), nil
}

// Delete removes key. A missing key is not an error.
func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s/%s: %w", m.name, key, err)
	}
	if v, ok := m.objs.LoadAndDelete(key); ok && m.bodies != nil {
		m.bodies.release(key, v.([]byte))
	}
	return nil
}

// List returns the keys that start with prefix, in lexical order.
func (m *Mem) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", m.name, prefix, err)
	}
	var keys []string
	m.objs.Range(func(k, _ any) bool {
		if k := k.(string); strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return true
	})
	slices.Sort(keys)
	return keys, nil
}

// Keys returns every key in lexical order. A test helper: it takes no
// context and cannot fail.
func (m *Mem) Keys() []string {
	keys, _ := m.List(context.Background(), "")
	return keys
}

// Len returns the number of objects. A test helper.
func (m *Mem) Len() int {
	n := 0
	m.objs.Range(func(_, _ any) bool { n++; return true })
	return n
}
