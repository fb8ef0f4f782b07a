package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strandlog/strand/shared/objstore"
)

// GetModel is a GET latency model: a lognormal time to first byte, then
// the body at a per-connection bandwidth (0: unlimited). The defaults and
// the published figures they follow are in docs/performance/ingest.md.
type GetModel struct {
	FirstByte Latency
	MBps      float64 // per GET, MB = 10^6 bytes per second
}

// lognormal draws latencies from a Latency (median and 0.99 quantile),
// capped at 100x the 0.99 quantile. Safe for concurrent use.
type lognormal struct {
	mu  sync.Mutex
	rng *rand.Rand
	lat Latency
}

func newLognormal(seed int64, stream uint64, lat Latency) *lognormal {
	return &lognormal{rng: rand.New(rand.NewPCG(uint64(seed), stream)), lat: lat}
}

func (l *lognormal) draw() time.Duration {
	if l.lat.P50 == 0 {
		return 0
	}
	l.mu.Lock()
	z := l.rng.NormFloat64()
	l.mu.Unlock()
	mu := math.Log(float64(l.lat.P50))
	sigma := (math.Log(float64(l.lat.P99)) - mu) / 2.3263478740408408
	return time.Duration(math.Min(math.Exp(mu+sigma*z), 100*float64(l.lat.P99)))
}

// getCount counts the GETs of a set of buckets and the bytes they returned.
type getCount struct{ gets, bytes atomic.Int64 }

// modelledGets wraps a bucket: every Get takes at least the model's first
// byte plus its body at the model's bandwidth (the call's own time is
// inside), and is counted.
type modelledGets struct {
	objstore.Bucket
	m     GetModel
	first *lognormal
	n     *getCount
}

var (
	_ objstore.Bucket     = (*modelledGets)(nil)
	_ objstore.ReaderInto = (*modelledGets)(nil)
	_ objstore.Keeper     = (*modelledGets)(nil)
	_ objstore.Viewer     = (*modelledGets)(nil)
)

// KeepIfAbsent gives body on (objstore.PutGiven): the model is of GETs.
func (b *modelledGets) KeepIfAbsent(ctx context.Context, key string, body []byte) error {
	return objstore.PutGiven(ctx, b.Bucket, key, body)
}

func withGetModel(b objstore.Bucket, m GetModel, first *lognormal, n *getCount) *modelledGets {
	return &modelledGets{Bucket: b, m: m, first: first, n: n}
}

// transfer is the time the model gives a body of size bytes.
func (m GetModel) transfer(size int) time.Duration {
	if m.MBps <= 0 {
		return 0
	}
	return time.Duration(float64(size) / (m.MBps * 1e6) * float64(time.Second))
}

func (b *modelledGets) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	start := time.Now()
	body, err := b.Bucket.Get(ctx, key, off, n)
	if serr := b.model(ctx, start, len(body)); serr != nil && err == nil {
		return nil, serr
	}
	return body, err
}

// View is Get of the bucket's own bytes (objstore.Viewer), counted and
// timed the same.
func (b *modelledGets) View(ctx context.Context, key string, off, n int64) ([]byte, error) {
	start := time.Now()
	body, err := objstore.View(ctx, b.Bucket, key, off, n)
	if serr := b.model(ctx, start, len(body)); serr != nil && err == nil {
		return nil, serr
	}
	return body, err
}

// GetInto is Get into the caller's buffer (objstore.ReaderInto), counted
// and timed the same.
func (b *modelledGets) GetInto(ctx context.Context, key string, off int64, dst []byte) (int, error) {
	start := time.Now()
	got, err := objstore.GetInto(ctx, b.Bucket, key, off, dst)
	if serr := b.model(ctx, start, got); serr != nil && err == nil {
		return 0, serr
	}
	return got, err
}

// model counts a GET of size bytes begun at start and makes it last the
// model's first byte plus its body's time.
func (b *modelledGets) model(ctx context.Context, start time.Time, size int) error {
	b.n.gets.Add(1)
	b.n.bytes.Add(int64(size))
	want := b.first.draw() + b.m.transfer(size)
	if rest := want - time.Since(start); rest > 0 {
		return objstore.SleepContext(ctx, rest)
	}
	return nil
}
