package chain

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrInvalid: a malformed Set or argument.
	ErrInvalid = errors.New("chain: invalid argument")
	// ErrStuck: a slot that can be neither committed nor dead (junk or
	// flights in too many buckets for K-W+1 poisons to fit). Never normal:
	// an operator must look.
	ErrStuck = errors.New("chain: slot can be neither committed nor dead")
	// ErrLost: a slot below the cut with no readable flight copy in any
	// bucket. Data loss; never skipped.
	ErrLost = errors.New("chain: committed slot has no readable flight copy")
	// ErrDeadline: buckets stayed unavailable past the retry deadline.
	ErrDeadline = errors.New("chain: retry deadline passed")
	// ErrNoCopy: ReadRange found no copy that answered and passed its check.
	ErrNoCopy = errors.New("chain: no good copy")
)

// Retry defaults.
const (
	DefaultRetryFor     = 2 * time.Minute
	DefaultBackoff      = 20 * time.Millisecond
	DefaultBackoffLimit = 2 * time.Second
)

// Set is the bucket set of one star's loglet of one class: K = len(Buckets)
// buckets holding every slot at the same key, quorum W. A Set is a value;
// its methods are safe for concurrent use (the buckets must be).
type Set struct {
	Star    string
	Buckets []objstore.Bucket
	W       int

	// Clock times retries; nil is the real clock.
	Clock clock.Clock
	// RetryFor bounds how long Fence and Walk retry unavailable buckets on
	// one slot before they fail with ErrDeadline (0: DefaultRetryFor).
	RetryFor time.Duration
	// Backoff is the first wait between retry rounds, doubling up to
	// DefaultBackoffLimit (0: DefaultBackoff).
	Backoff time.Duration
	// ReadAhead is how many slots Walk reads and Fence classifies in
	// parallel ahead of the one it decides (0: DefaultReadAhead; 1: none).
	// It turns takeover and absorb time from slots x round trips into
	// slots / ReadAhead x round trips; results are still used in slot order.
	ReadAhead int
	// Hedge is how long a read (Walk's and ReadRange's) waits for one copy
	// before it also asks the next bucket; the first good answer wins
	// (0: DefaultHedge; < 0: never, strictly one bucket after another). A
	// slow or silent zone then costs one hedge delay, not its own latency.
	Hedge time.Duration
}

// DefaultHedge is the default Set.Hedge.
const DefaultHedge = 20 * time.Millisecond

// hedged runs try on the buckets in order, starting the next one when the
// running ones have not succeeded within the hedge delay, or as soon as one
// fails, and no further one once ctx is cancelled. It returns the index of
// the first try that succeeded, or -1 when every try started failed (then
// all have returned). try must only write state of
// its own bucket index; the losers' contexts are cancelled.
func (s Set) hedged(ctx context.Context, try func(ctx context.Context, i int) bool) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hedge := s.Hedge
	if hedge == 0 {
		hedge = DefaultHedge
	}
	clk := clock.OrReal(s.Clock)
	type result struct {
		i  int
		ok bool
	}
	k := len(s.Buckets)
	done := make(chan result, k)
	next, pending := 0, 0
	launch := func() {
		i := next
		next++
		pending++
		go func() { done <- result{i, try(ctx, i)} }()
	}
	launch()
	for pending > 0 {
		var timer <-chan time.Time
		if next < k && hedge > 0 {
			timer = clk.After(hedge)
		}
		select {
		case r := <-done:
			pending--
			if r.ok {
				return r.i
			}
			if ctx.Err() != nil {
				// The caller gave up (a read-ahead no read waits for any
				// more): no copy left is asked; the tries in flight end
				// on the cancelled context and are waited for.
				next = k
			}
			if next < k {
				launch()
			}
		case <-timer:
			if ctx.Err() != nil {
				next = k
				continue
			}
			launch()
		}
	}
	return -1
}

// DefaultReadAhead is the default Set.ReadAhead.
const DefaultReadAhead = 16

func (s Set) readAhead() int {
	if s.ReadAhead > 0 {
		return s.ReadAhead
	}
	return DefaultReadAhead
}

// K is the number of buckets.
func (s Set) K() int { return len(s.Buckets) }

// Validate checks the set: a star, 1 <= W <= K, no nil bucket.
func (s Set) Validate() error {
	if s.Star == "" {
		return fmt.Errorf("%w: set without a star", ErrInvalid)
	}
	if len(s.Buckets) == 0 || s.W < 1 || s.W > len(s.Buckets) {
		return fmt.Errorf("%w: star %s: K=%d W=%d (want 1 <= W <= K)", ErrInvalid, s.Star, len(s.Buckets), s.W)
	}
	for i, b := range s.Buckets {
		if b == nil {
			return fmt.Errorf("%w: star %s: bucket %d is nil", ErrInvalid, s.Star, i)
		}
	}
	return nil
}

// ReadEnvelope reads one copy's envelope with one bounded GET of bytes 0..59
// and classifies it: ErrNotFound is Missing, an envelope that does not parse
// is Junk, a flight or poison is Flight or Poison. If key is a slot key
// (format.SlotKey), an envelope of another epoch or slot is Junk. Any other
// error (unavailable, cancelled) is returned: the caller retries.
func (s Set) ReadEnvelope(ctx context.Context, bucket int, key string) (Copy, error) {
	b := s.Buckets[bucket]
	body, err := b.Get(ctx, key, 0, format.EnvelopeSize)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return Copy{State: Missing}, nil
	case errors.Is(err, objstore.ErrRange):
		return Copy{State: Junk, Err: err}, nil
	case err != nil:
		return Copy{}, fmt.Errorf("read envelope %s/%s: %w", b.Name(), key, err)
	}
	env, err := format.ParseEnvelope(body)
	if err != nil {
		return Copy{State: Junk, Err: err}, nil
	}
	c := copyOf(env)
	if _, epoch, slot, ok := ParseSlotKey(key); ok {
		c = c.For(epoch, slot)
	}
	return c, nil
}

// readSlot reads bucket i's copy of (epoch, slot).
func (s Set) readSlot(ctx context.Context, i int, epoch, slot uint64) (Copy, error) {
	c, err := s.ReadEnvelope(ctx, i, format.SlotKey(s.Star, epoch, slot))
	if err != nil {
		return c, err
	}
	return c.For(epoch, slot), nil
}

// retrier paces retry rounds on one slot.
type retrier struct {
	clk      clock.Clock
	deadline time.Time
	wait     time.Duration
	limit    time.Duration
}

func (s Set) retrier() *retrier {
	clk := clock.OrReal(s.Clock)
	d := s.RetryFor
	if d <= 0 {
		d = DefaultRetryFor
	}
	w := s.Backoff
	if w <= 0 {
		w = DefaultBackoff
	}
	return &retrier{clk: clk, deadline: clk.Now().Add(d), wait: w, limit: max(w, DefaultBackoffLimit)}
}

// pause waits before the next round, or fails once the deadline has passed
// or ctx is done. cause is the last transient error, for the message.
func (r *retrier) pause(ctx context.Context, cause error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := r.clk.Now()
	if !now.Before(r.deadline) {
		return fmt.Errorf("%w (last error: %v)", ErrDeadline, cause)
	}
	d := min(r.wait, r.deadline.Sub(now))
	r.wait = min(2*r.wait, r.limit)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.clk.After(d):
		return nil
	}
}

// Fence fences epoch from slot `from` upward and returns the cut: the first
// slot that is not committed. Each slot is classified by bounded envelope
// reads in every bucket (SlotFence decides); a committed slot moves on to
// the next; otherwise the fencer writes its poison with PutIfAbsent to
// buckets it has read as missing until K-W+1 buckets hold poison (anyone's),
// and that dead slot is the cut. Occupied and ambiguous puts are resolved by
// reading the envelope back. Unavailable buckets are retried with backoff
// until RetryFor passes on one slot (ErrDeadline). Fence never deletes.
//
// Occupants are permanent, so any number of fencers racing, and a writer
// racing them, compute the same cut.
func (s Set) Fence(ctx context.Context, epoch, from uint64, nonce format.Nonce) (uint64, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	ahead := uint64(s.readAhead())
	for base := from; ; base += ahead {
		// Classify a window of slots by parallel reads: a slot read as
		// committed is committed for good. Anything else (including a read
		// error) goes through the full decision, in slot order.
		committed := s.committedAhead(ctx, epoch, base, ahead)
		for i := uint64(0); i < ahead; i++ {
			if committed[i] {
				continue
			}
			slot := base + i
			v, err := s.fenceSlot(ctx, epoch, slot, nonce)
			if err != nil {
				return 0, fmt.Errorf("fence %s epoch %d slot %d: %w", s.Star, epoch, slot, err)
			}
			if v == Dead {
				return slot, nil
			}
		}
	}
}

// committedAhead reads slots [base, base+n) in every bucket in parallel and
// reports which hold W copies of our flight. It only reads.
func (s Set) committedAhead(ctx context.Context, epoch, base, n uint64) []bool {
	out := make([]bool, n)
	if n == 1 {
		return out
	}
	var wg sync.WaitGroup
	for i := uint64(0); i < n; i++ {
		wg.Go(func() {
			states := make([]State, len(s.Buckets))
			for b := range s.Buckets {
				c, err := s.readSlot(ctx, b, epoch, base+i)
				if err != nil {
					states[b] = Unknown
					continue
				}
				states[b] = c.State
			}
			out[i] = Classify(s.W, states) == Committed
		})
	}
	wg.Wait()
	return out
}

// FenceSlot decides one slot of epoch as Fence does (poisoning it if it is
// not committed) and returns Committed or Dead.
func (s Set) FenceSlot(ctx context.Context, epoch, slot uint64, nonce format.Nonce) (Verdict, error) {
	if err := s.Validate(); err != nil {
		return Undecided, err
	}
	v, err := s.fenceSlot(ctx, epoch, slot, nonce)
	if err != nil {
		return Undecided, fmt.Errorf("fence %s epoch %d slot %d: %w", s.Star, epoch, slot, err)
	}
	return v, nil
}

func (s Set) fenceSlot(ctx context.Context, epoch, slot uint64, nonce format.Nonce) (Verdict, error) {
	key := format.SlotKey(s.Star, epoch, slot)
	poison := format.Poison(epoch, slot, nonce).Bytes()
	m, err := NewSlotFence(len(s.Buckets), s.W)
	if err != nil {
		return Undecided, err
	}
	r := s.retrier()
	type result struct {
		state State
		put   PutOutcome
		err   error
	}
	for {
		ops, v, err := m.Plan()
		if err != nil || v != Undecided {
			return v, err
		}
		res := make([]result, len(ops))
		var wg sync.WaitGroup
		for j, op := range ops {
			wg.Go(func() {
				switch op.Kind {
				case OpRead:
					c, err := s.readSlot(ctx, op.Bucket, epoch, slot)
					res[j] = result{state: c.State, err: err}
				case OpPoison:
					err := s.Buckets[op.Bucket].PutIfAbsent(ctx, key, poison)
					switch {
					case err == nil:
						res[j].put = PutCreated
					case errors.Is(err, objstore.ErrExists), errors.Is(err, objstore.ErrAmbiguous):
						res[j].put = PutOccupied
					default:
						res[j] = result{put: PutFailed, err: fmt.Errorf("poison %s/%s: %w", s.Buckets[op.Bucket].Name(), key, err)}
					}
				}
			})
		}
		wg.Wait()
		var cause error
		for j, op := range ops {
			switch op.Kind {
			case OpRead:
				m.ObserveRead(op.Bucket, res[j].state) // Unknown on error
			case OpPoison:
				m.ObservePut(op.Bucket, res[j].put)
			}
			if res[j].err != nil {
				cause = res[j].err
			}
		}
		if cause != nil {
			if err := r.pause(ctx, cause); err != nil {
				return Undecided, fmt.Errorf("copies %s: %w", describe(m.States()), err)
			}
		}
	}
}

// Slot is one committed slot as Walk found it: the copy that answered, its
// envelope and its parsed footer.
type Slot struct {
	Seq      uint64
	Key      string
	Bucket   int // index in Buckets of the copy read
	Envelope format.Envelope
	Entries  []format.FooterEntry
	// Batches is the flight's batch table (format version 2; nil for 1).
	Batches []format.BatchEntry
	// Commands is the flight's command table (format version 3; nil
	// before): each listed stream's command state after its segment.
	Commands []format.CommandEntry
	// Carried is the flight's carried table (format version 4, ADR 0062;
	// nil before): the dedupe tables the star carried for its streams.
	Carried []format.CarriedEntry
}

// Walk calls fn for every committed slot in [from, cut) of epoch, in slot
// order, by point lookups (never a listing). For each slot it reads the
// envelope from the first bucket that holds our flight and then that copy's
// footer (format.ParseFooter); a missing, corrupt or unavailable copy falls
// through to the next bucket. A slot with no readable flight copy anywhere
// is an error matching ErrLost: at once when every bucket answered without a
// flight (missing, poison, another slot's envelope), otherwise after
// retrying until RetryFor passes. An error from fn stops the walk and is
// returned as is.
func (s Set) Walk(ctx context.Context, epoch, from, cut uint64, fn func(Slot) error) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if from > cut {
		return fmt.Errorf("%w: walk from %d past cut %d", ErrInvalid, from, cut)
	}
	// Read ahead: up to ReadAhead slots in flight, used in slot order.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		sl  Slot
		err error
	}
	queue := make(chan chan result, s.readAhead()-1)
	go func() {
		defer close(queue)
		for slot := from; slot < cut; slot++ {
			ch := make(chan result, 1)
			select {
			case queue <- ch:
			case <-ctx.Done():
				return
			}
			go func() {
				sl, err := s.readFlight(ctx, epoch, slot)
				ch <- result{sl, err}
			}()
		}
	}()
	for ch := range queue {
		r := <-ch
		if r.err != nil {
			return fmt.Errorf("walk %s epoch %d: %w", s.Star, epoch, r.err)
		}
		if err := fn(r.sl); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// readFlight finds a readable flight copy of a committed slot.
func (s Set) readFlight(ctx context.Context, epoch, slot uint64) (Slot, error) {
	key := format.SlotKey(s.Star, epoch, slot)
	r := s.retrier()
	for {
		k := len(s.Buckets)
		errs := make([]error, k)
		isAbsent := make([]bool, k) // answered definitively without our flight
		found := make([]Slot, k)
		win := s.hedged(ctx, func(ctx context.Context, i int) bool {
			b := s.Buckets[i]
			c, err := s.readSlot(ctx, i, epoch, slot)
			if err != nil {
				errs[i] = err
				return false
			}
			switch c.State {
			case Missing, Poison:
				isAbsent[i], errs[i] = true, fmt.Errorf("%s/%s: %s", b.Name(), key, c.State)
				return false
			case Junk:
				// Possibly a read corrupted in transit: not definitive.
				errs[i] = fmt.Errorf("%s/%s: junk: %v", b.Name(), key, c.Err)
				return false
			}
			foot, err := b.Get(ctx, key, int64(c.Env.FooterOff), int64(c.Env.FooterLen))
			if err != nil {
				errs[i] = fmt.Errorf("footer %s/%s: %w", b.Name(), key, err)
				return false
			}
			ft, err := format.ParseFooterTables(c.Env, foot)
			if err != nil {
				errs[i] = fmt.Errorf("footer %s/%s: %w", b.Name(), key, err)
				return false
			}
			found[i] = Slot{Seq: slot, Key: key, Bucket: i, Envelope: c.Env, Entries: ft.Entries, Batches: ft.Batches, Commands: ft.Commands, Carried: ft.Carried}
			return true
		})
		if win >= 0 {
			return found[win], nil
		}
		absent := 0
		for _, a := range isAbsent {
			if a {
				absent++
			}
		}
		cause := errors.Join(errs...)
		if absent == len(s.Buckets) {
			return Slot{}, fmt.Errorf("slot %d: %w: %v", slot, ErrLost, cause)
		}
		if err := r.pause(ctx, cause); err != nil {
			return Slot{}, fmt.Errorf("slot %d: %w: %w", slot, ErrLost, err)
		}
	}
}

// ReadRange reads n bytes at off of key (n < 0: to the end), falling
// through the bucket set in order until a copy answers and passes check
// (nil check accepts any bytes). With n >= 0 a copy shorter than n bytes is
// skipped as truncated; a copy that fails check is skipped, never returned.
// It makes one pass and does not retry; when no copy passes, the error
// wraps objstore.ErrUnavailable if some bucket was unavailable (a retry may
// succeed), else ErrNoCopy if some copy was present but bad, else
// objstore.ErrNotFound.
func (s Set) ReadRange(ctx context.Context, key string, off, n int64, check func([]byte) error) ([]byte, error) {
	return s.readRange(ctx, key, off, n, check, get)
}

// ViewRange is ReadRange for a caller that only reads the bytes: each
// copy is read with objstore.View, so the bytes returned may be a
// bucket's own (an in-memory bucket's, with no copy), and the caller must
// not write them (issue 36: settle's reads in `strand bench`).
func (s Set) ViewRange(ctx context.Context, key string, off, n int64, check func([]byte) error) ([]byte, error) {
	return s.readRange(ctx, key, off, n, check, objstore.View)
}

// get is objstore.Bucket's Get in objstore.View's shape.
func get(ctx context.Context, b objstore.Bucket, key string, off, n int64) ([]byte, error) {
	return b.Get(ctx, key, off, n)
}

func (s Set) readRange(ctx context.Context, key string, off, n int64, check func([]byte) error,
	get func(context.Context, objstore.Bucket, string, int64, int64) ([]byte, error)) ([]byte, error) {
	if len(s.Buckets) == 0 {
		return nil, fmt.Errorf("%w: read %s from an empty set", ErrInvalid, key)
	}
	k := len(s.Buckets)
	errs := make([]error, k)
	bodies := make([][]byte, k)
	unavail, bad := make([]bool, k), make([]bool, k)
	win := s.hedged(ctx, func(ctx context.Context, i int) bool {
		b := s.Buckets[i]
		body, err := get(ctx, b, key, off, n)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			errs[i] = fmt.Errorf("%s: not found", b.Name())
			return false
		case errors.Is(err, objstore.ErrRange):
			bad[i], errs[i] = true, fmt.Errorf("%s: range %d+%d not satisfiable", b.Name(), off, n)
			return false
		case err != nil:
			unavail[i], errs[i] = true, err
			return false
		}
		if n >= 0 && int64(len(body)) != n {
			bad[i], errs[i] = true, fmt.Errorf("%s: %d of %d bytes", b.Name(), len(body), n)
			return false
		}
		if check != nil {
			if err := check(body); err != nil {
				bad[i], errs[i] = true, fmt.Errorf("%s: %w", b.Name(), err)
				return false
			}
		}
		bodies[i] = body
		return true
	})
	if win >= 0 {
		return bodies[win], nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("read %s: %w", key, ctx.Err())
	}
	unavailable, anyBad := false, false
	for i := range k {
		unavailable = unavailable || unavail[i]
		anyBad = anyBad || bad[i]
	}
	sentinel := objstore.ErrNotFound
	switch {
	case unavailable:
		sentinel = objstore.ErrUnavailable
	case anyBad:
		sentinel = ErrNoCopy
	}
	return nil, fmt.Errorf("read %s at %d+%d: %w (%v)", key, off, n, sentinel, errors.Join(errs...))
}
