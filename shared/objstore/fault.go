package objstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Op names a Bucket operation, for fault targeting, counters and traces.
type Op uint8

// The operations of a Bucket (Name is not an operation: it never fails).
const (
	OpPut Op = iota // PutIfAbsent
	OpGet
	OpHead
	OpDelete
	OpList
	numOps
)

// allOps lists every operation, in order.
var allOps = []Op{OpPut, OpGet, OpHead, OpDelete, OpList}

// String returns the operation's short name, as used in traces.
func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpGet:
		return "get"
	case OpHead:
		return "head"
	case OpDelete:
		return "delete"
	case OpList:
		return "list"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Corruption is a way a read can come back wrong.
type Corruption uint8

const (
	// CorruptNone: the read is returned as the store gave it.
	CorruptNone Corruption = iota
	// CorruptFlip: the right length with exactly one bit flipped.
	CorruptFlip
	// CorruptTruncate: a strict prefix of the bytes (possibly empty).
	CorruptTruncate
)

// z99 is the 0.99 quantile of the standard normal distribution.
const z99 = 2.3263478740408408

// latencyCap bounds a latency sample at this multiple of p99, so a draw from
// the far tail cannot stall a simulation for hours.
const latencyCap = 100

type latency struct {
	set       bool
	mu, sigma float64 // of ln(latency in ns)
	max       float64 // ns
}

// Injector decides which faults a WithFaults bucket injects. Every setter
// may be called at any time, also while calls are running. All randomness
// comes from one PCG source seeded by NewInjector, so a single-threaded
// sequence of calls with the same configuration makes the same decisions.
// An Injector may be shared by several wrapped buckets; they then share its
// faults (SetDown downs all of them) and counters.
type Injector struct {
	mu       sync.Mutex
	rng      *rand.Rand
	sleep    func(context.Context, time.Duration) error
	putNow   func() time.Time // non-nil: a put's latency covers its call (SetPutLatencyCoversCall)
	onCall   func(op Op, key string)
	lat      [numOps]latency
	errRate  [numOps]float64
	down     bool
	ambLand  float64 // P(put lands, answer lost)
	ambLost  float64 // P(put does not land, ErrAmbiguous)
	forceAmb int     // next puts forced ambiguous
	forceLnd bool    // whether forced ambiguous puts land
	flip     float64 // P(Get flips a bit)
	trunc    float64 // P(Get is truncated)
	forceCor int     // next Gets forced corrupt
	forceKnd Corruption

	calls  [numOps]atomic.Int64
	faults atomic.Int64
}

// NewInjector returns an Injector with no faults configured, whose random
// decisions derive only from seed. It sleeps with SleepContext until
// SetSleep replaces it.
func NewInjector(seed int64) *Injector {
	s := uint64(seed)
	return &Injector{
		rng:   rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15)),
		sleep: SleepContext,
	}
}

// SleepContext waits for d or until ctx is done, whichever is first, and
// returns ctx.Err() in the second case. It is the Injector's default sleep.
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SetSleep replaces the function that applies latency, so a simulation can
// drive its own clock or a test can record delays. nil restores
// SleepContext.
func (in *Injector) SetSleep(sleep func(ctx context.Context, d time.Duration) error) {
	if sleep == nil {
		sleep = SleepContext
	}
	in.mu.Lock()
	in.sleep = sleep
	in.mu.Unlock()
}

// OnCall sets a hook called at the start of every operation, before any
// fault is decided, with the key (the prefix for List). Tests use it to
// print or check the trace of calls. nil removes the hook. The hook runs on
// the caller's goroutine and must be safe for concurrent use.
func (in *Injector) OnCall(fn func(op Op, key string)) {
	in.mu.Lock()
	in.onCall = fn
	in.mu.Unlock()
}

func opsOrAll(ops []Op) []Op {
	if len(ops) == 0 {
		return allOps
	}
	return ops
}

func checkOps(ops []Op) error {
	for _, op := range ops {
		if op >= numOps {
			return fmt.Errorf("objstore: fault injector: unknown %v", op)
		}
	}
	return nil
}

func checkProb(what string, p float64) error {
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("objstore: fault injector: %s probability %v not in [0, 1]", what, p)
	}
	return nil
}

// SetPutLatencyCoversCall makes a delayed PutIfAbsent that no fault
// fails run the wrapped bucket's call first and then wait only what is
// left of its delay, read on now: the call takes max(delay, the wrapped
// call's time), not their sum. The object lands before the answer, as an
// S3 put may be visible before its response arrives; a ctx that ends
// while the rest is waited answers ErrAmbiguous (the put landed). For a
// model whose latency is the whole of a remote put (the in-process bench,
// ADR 0068): a memory bucket's copy of the body is the model's keeping of
// bytes S3 holds, not time the caller waits on top of S3's. Failures,
// ambiguous answers and other operations keep their order (the delay,
// then the call). nil turns it off (the default).
func (in *Injector) SetPutLatencyCoversCall(now func() time.Time) {
	in.mu.Lock()
	in.putNow = now
	in.mu.Unlock()
}

// SetLatency makes ops (all operations if none are given) wait a random
// time before they run, drawn from the log-normal distribution whose median
// is p50 and whose 0.99 quantile is p99 (samples are capped at 100×p99).
// p50 == p99 gives a constant delay; p50 == p99 == 0 removes the latency.
func (in *Injector) SetLatency(p50, p99 time.Duration, ops ...Op) error {
	if err := checkOps(ops); err != nil {
		return err
	}
	var l latency
	switch {
	case p50 == 0 && p99 == 0:
	case p50 <= 0 || p99 < p50:
		return fmt.Errorf("objstore: fault injector: latency p50 %v, p99 %v: want 0 < p50 <= p99", p50, p99)
	default:
		l = latency{
			set:   true,
			mu:    math.Log(float64(p50)),
			sigma: (math.Log(float64(p99)) - math.Log(float64(p50))) / z99,
			max:   latencyCap * float64(p99),
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, op := range opsOrAll(ops) {
		in.lat[op] = l
	}
	return nil
}

// SetErrorRate makes each of ops (all operations if none are given) fail
// with ErrUnavailable with probability p, without reaching the bucket.
func (in *Injector) SetErrorRate(p float64, ops ...Op) error {
	if err := checkOps(ops); err != nil {
		return err
	}
	if err := checkProb("error", p); err != nil {
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, op := range opsOrAll(ops) {
		in.errRate[op] = p
	}
	return nil
}

// SetDown takes the bucket down (every operation fails at once with
// ErrUnavailable, without latency) or brings it back up.
func (in *Injector) SetDown(down bool) {
	in.mu.Lock()
	in.down = down
	in.mu.Unlock()
}

// SetAmbiguous makes PutIfAbsent answer ErrAmbiguous: with probability
// landed after performing the put on the bucket (the write landed, the
// answer was lost), and with probability lost without performing it.
func (in *Injector) SetAmbiguous(landed, lost float64) error {
	if err := checkProb("ambiguous landed", landed); err != nil {
		return err
	}
	if err := checkProb("ambiguous lost", lost); err != nil {
		return err
	}
	if landed+lost > 1 {
		return fmt.Errorf("objstore: fault injector: ambiguous probabilities %v + %v > 1", landed, lost)
	}
	in.mu.Lock()
	in.ambLand, in.ambLost = landed, lost
	in.mu.Unlock()
	return nil
}

// ForceAmbiguous makes the next n PutIfAbsent calls (that are not failed by
// SetDown or SetErrorRate) answer ErrAmbiguous, after performing the put if
// landed is true and without it otherwise. It replaces an earlier
// ForceAmbiguous; n == 0 cancels it.
func (in *Injector) ForceAmbiguous(n int, landed bool) {
	in.mu.Lock()
	in.forceAmb, in.forceLnd = max(n, 0), landed
	in.mu.Unlock()
}

// SetCorrupt makes a successful, non-empty Get return a body with one bit
// flipped with probability flip, or a truncated body with probability
// truncate. The stored object is not changed.
func (in *Injector) SetCorrupt(flip, truncate float64) error {
	if err := checkProb("corrupt flip", flip); err != nil {
		return err
	}
	if err := checkProb("corrupt truncate", truncate); err != nil {
		return err
	}
	if flip+truncate > 1 {
		return fmt.Errorf("objstore: fault injector: corruption probabilities %v + %v > 1", flip, truncate)
	}
	in.mu.Lock()
	in.flip, in.trunc = flip, truncate
	in.mu.Unlock()
	return nil
}

// ForceCorrupt makes the next n Get calls (that are not failed by SetDown
// or SetErrorRate) return bodies corrupted as kind. A call whose read fails
// or returns zero bytes is not corrupted but still uses one of the n. It
// replaces an earlier ForceCorrupt; n == 0 cancels it.
func (in *Injector) ForceCorrupt(n int, kind Corruption) {
	in.mu.Lock()
	in.forceCor, in.forceKnd = max(n, 0), kind
	in.mu.Unlock()
}

// Clear removes every configured fault: latency, error rates, down,
// ambiguity and corruption, forced or random. The hook, the sleep
// function, the random source and the counters are kept.
func (in *Injector) Clear() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.lat = [numOps]latency{}
	in.errRate = [numOps]float64{}
	in.down = false
	in.ambLand, in.ambLost, in.forceAmb = 0, 0, 0
	in.flip, in.trunc, in.forceCor = 0, 0, 0
}

// Calls returns how many times op was called on buckets using this
// Injector, faulted or not.
func (in *Injector) Calls(op Op) int64 {
	if op >= numOps {
		return 0
	}
	return in.calls[op].Load()
}

// Faults returns how many faults were injected: failures, ambiguous answers
// and corrupted reads (latency is not counted).
func (in *Injector) Faults() int64 { return in.faults.Load() }

// ambiguity is the fate decided for a PutIfAbsent.
type ambiguity uint8

const (
	ambNone ambiguity = iota
	ambLanded
	ambLost
)

// plan is what the Injector decided for one call.
type plan struct {
	delay   time.Duration
	sleep   func(context.Context, time.Duration) error
	now     func() time.Time // SetPutLatencyCoversCall's clock, for puts
	down    bool             // fail at once with ErrUnavailable
	fail    string           // non-empty: fail with ErrUnavailable for this reason
	amb     ambiguity
	corrupt Corruption
	pick    uint64 // randomness for the corruption's position
}

// decide takes the decisions for one call of op, in a fixed order of draws.
// A draw is made only for a fault that is configured, so a fault-free
// Injector consumes no randomness.
func (in *Injector) decide(op Op, key string) plan {
	in.calls[op].Add(1)
	in.mu.Lock()
	hook := in.onCall
	p := plan{sleep: in.sleep}
	if op == OpPut {
		p.now = in.putNow
	}
	switch {
	case in.down:
		p.down, p.fail = true, "bucket down"
	default:
		if l := in.lat[op]; l.set {
			ns := math.Exp(l.mu + l.sigma*in.rng.NormFloat64())
			p.delay = time.Duration(math.Round(min(ns, l.max)))
		}
		if r := in.errRate[op]; r > 0 && in.rng.Float64() < r {
			p.fail = "error"
			break
		}
		switch op {
		case OpPut:
			switch {
			case in.forceAmb > 0:
				in.forceAmb--
				p.amb = ambLost
				if in.forceLnd {
					p.amb = ambLanded
				}
			case in.ambLand+in.ambLost > 0:
				u := in.rng.Float64()
				if u < in.ambLand {
					p.amb = ambLanded
				} else if u < in.ambLand+in.ambLost {
					p.amb = ambLost
				}
			}
		case OpGet:
			switch {
			case in.forceCor > 0:
				in.forceCor--
				p.corrupt = in.forceKnd
			case in.flip+in.trunc > 0:
				u := in.rng.Float64()
				if u < in.flip {
					p.corrupt = CorruptFlip
				} else if u < in.flip+in.trunc {
					p.corrupt = CorruptTruncate
				}
			}
			if p.corrupt != CorruptNone {
				p.pick = in.rng.Uint64()
			}
		}
	}
	in.mu.Unlock()
	if hook != nil {
		hook(op, key)
	}
	return p
}

// WithFaults wraps b so every call goes through inj, which can delay it,
// fail it, answer a put ambiguously or corrupt a read. With no fault
// configured the wrapper is transparent (it passes the conformance suite)
// and only counts and traces calls. A nil inj gets a fresh NewInjector(0).
func WithFaults(b Bucket, inj *Injector) Bucket {
	if inj == nil {
		inj = NewInjector(0)
	}
	return &faultBucket{b: b, inj: inj}
}

type faultBucket struct {
	b   Bucket
	inj *Injector
}

var (
	_ Bucket = (*faultBucket)(nil)
	_ Viewer = (*faultBucket)(nil)
)

func (f *faultBucket) Name() string { return f.b.Name() }

// before decides a call's plan and applies its failure and latency; a
// non-nil error means the call must return it without reaching the
// bucket.
func (f *faultBucket) before(ctx context.Context, op Op, key string) (plan, error) {
	p := f.inj.decide(op, key)
	return p, f.apply(ctx, op, key, p)
}

// putCovered is a put whose delay covers the wrapped call
// (SetPutLatencyCoversCall): the call, then the rest of the delay.
func (f *faultBucket) putCovered(ctx context.Context, key string, body []byte, p plan) error {
	start := p.now()
	err := f.b.PutIfAbsent(ctx, key, body)
	if left := p.delay - p.now().Sub(start); left > 0 {
		if serr := p.sleep(ctx, left); serr != nil && err == nil {
			return fmt.Errorf("put %s/%s: landed, then during injected latency: %w: %w", f.b.Name(), key, ErrAmbiguous, serr)
		}
	}
	return err
}

// apply applies plan p's failure and latency to a call of op; a non-nil
// error means the call must return it without reaching the bucket.
func (f *faultBucket) apply(ctx context.Context, op Op, key string, p plan) error {
	if p.down {
		f.inj.faults.Add(1)
		return fmt.Errorf("%s %s/%s: injected fault (%s): %w", op, f.b.Name(), key, p.fail, ErrUnavailable)
	}
	if p.delay > 0 {
		if err := p.sleep(ctx, p.delay); err != nil {
			return fmt.Errorf("%s %s/%s: during injected latency: %w", op, f.b.Name(), key, err)
		}
	}
	if p.fail != "" {
		f.inj.faults.Add(1)
		return fmt.Errorf("%s %s/%s: injected fault (%s): %w", op, f.b.Name(), key, p.fail, ErrUnavailable)
	}
	return nil
}

func (f *faultBucket) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	p := f.inj.decide(OpPut, key)
	if p.now != nil && p.delay > 0 && !p.down && p.fail == "" && p.amb == ambNone {
		return f.putCovered(ctx, key, body, p)
	}
	if err := f.apply(ctx, OpPut, key, p); err != nil {
		return err
	}
	switch p.amb {
	case ambLanded:
		f.inj.faults.Add(1)
		inner := f.b.PutIfAbsent(ctx, key, body)
		return fmt.Errorf("put %s/%s: injected fault (answer lost, put returned %v): %w", f.b.Name(), key, inner, ErrAmbiguous)
	case ambLost:
		f.inj.faults.Add(1)
		return fmt.Errorf("put %s/%s: injected fault (request lost): %w", f.b.Name(), key, ErrAmbiguous)
	}
	return f.b.PutIfAbsent(ctx, key, body)
}

func (f *faultBucket) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return f.get(ctx, key, off, n, f.b.Get)
}

// View is Get through the wrapped bucket's View (Viewer): a fault sees
// the same calls, and a corrupted read is the wrapper's own copy, never
// a write into the bytes the wrapped bucket holds.
func (f *faultBucket) View(ctx context.Context, key string, off, n int64) ([]byte, error) {
	return f.get(ctx, key, off, n, func(ctx context.Context, key string, off, n int64) ([]byte, error) {
		return View(ctx, f.b, key, off, n)
	})
}

func (f *faultBucket) get(ctx context.Context, key string, off, n int64, get func(context.Context, string, int64, int64) ([]byte, error)) ([]byte, error) {
	p, err := f.before(ctx, OpGet, key)
	if err != nil {
		return nil, err
	}
	body, err := get(ctx, key, off, n)
	if err != nil || p.corrupt == CorruptNone || len(body) == 0 {
		return body, err
	}
	f.inj.faults.Add(1)
	bad := make([]byte, len(body))
	copy(bad, body)
	switch p.corrupt {
	case CorruptFlip:
		bit := p.pick % (uint64(len(bad)) * 8)
		bad[bit/8] ^= 1 << (bit % 8)
	case CorruptTruncate:
		bad = bad[:p.pick%uint64(len(bad))]
	}
	return bad, nil
}

func (f *faultBucket) Head(ctx context.Context, key string) (int64, error) {
	if _, err := f.before(ctx, OpHead, key); err != nil {
		return 0, err
	}
	return f.b.Head(ctx, key)
}

func (f *faultBucket) Delete(ctx context.Context, key string) error {
	if _, err := f.before(ctx, OpDelete, key); err != nil {
		return err
	}
	return f.b.Delete(ctx, key)
}

func (f *faultBucket) List(ctx context.Context, prefix string) ([]string, error) {
	if _, err := f.before(ctx, OpList, prefix); err != nil {
		return nil, err
	}
	return f.b.List(ctx, prefix)
}
