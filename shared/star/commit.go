package star

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"syscall"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/objstore"
)

// ErrForeign: a slot of our epoch holds something we did not write (a
// fencer's poison or another writer's flight). The epoch halts for good.
var ErrForeign = errors.New("star: foreign occupant in our slot")

// ErrNoConditionalWrites: a bucket accepted a second put-if-absent of the
// same key. strand cannot run on it.
var ErrNoConditionalWrites = errors.New("star: bucket does not enforce conditional writes (If-None-Match)")

// ErrQuorumDeadline: a flight could not reach W copies within its deadline.
var ErrQuorumDeadline = errors.New("star: write quorum not reached within the commit deadline")

type putOutcome struct {
	bucket  int
	ok      bool
	foreign bool
	err     error
}

// commit writes f's bundle to every bucket of the set in parallel; the slot
// is durable at W confirms. Stragglers finish in the background. commit
// returns (and the bundle's buffer may be recycled) only once every copy's
// upload has returned.
func (l *loglet) commit(ctx context.Context, f *flight) {
	defer l.uploaded(f)
	epoch := f.epoch
	key := format.SlotKey(l.s.cfg.StarID, epoch, f.slot)
	k, w := len(l.cfg.Buckets), l.cfg.W
	results := make(chan putOutcome, k)
	expired := make(chan struct{})
	timer := l.s.clk.After(l.cfg.CommitDeadline)
	obj := f.obj
	// last is the latest failed attempt of any copy: at the deadline the
	// copies are still retrying, and the halt must say why they fail.
	var last struct {
		sync.Mutex
		err error
	}
	note := func(i int, err error) {
		l.putFailed(i, err)
		last.Lock()
		first := last.err == nil
		last.err = err
		last.Unlock()
		if first {
			l.s.log.Warn("slot PUT failed; retrying until the commit deadline", "chain", l.chain.String(), "slot", key, "bucket", l.cfg.Buckets[i].Name(), "err", err.Error())
		}
	}
	for i := range l.cfg.Buckets {
		go func() { results <- l.putCopy(ctx, i, key, obj, epoch, f.slot, expired, note) }()
	}
	confirmed, failed := 0, 0
	var firstErr error
	durable := false
	for done := 0; done < k; {
		select {
		case r := <-results:
			done++
			if r.ok {
				confirmed++
				if confirmed == w {
					durable = true
					now := l.s.clk.Now()
					l.m.putLatency.Observe(now.Sub(f.cutAt).Seconds())
					l.trace(TraceDurable, f, now)
					l.markDurable(f)
				}
				continue
			}
			failed++
			if firstErr == nil {
				firstErr = r.err
			}
			if r.foreign {
				// Someone is fencing our epoch: halt, whether or not this
				// slot already committed (if it did, it stays acked).
				l.halt(epoch, fmt.Errorf("slot %s in bucket %s: %w", key, l.cfg.Buckets[r.bucket].Name(), r.err))
			}
			if !durable && k-failed < w {
				l.halt(epoch, fmt.Errorf("slot %s: %d of %d copies failed, W=%d unreachable: %w", key, failed, k, w, firstErr))
			}
		case <-timer:
			timer = nil
			close(expired)
			if !durable {
				last.Lock()
				cause := last.err
				last.Unlock()
				if cause == nil {
					cause = firstErr
				}
				if cause == nil {
					cause = errors.New("no copy answered (PUTs still pending)")
				}
				l.halt(epoch, fmt.Errorf("slot %s: %d of W=%d copies after %s: %w: %w", key, confirmed, w, l.cfg.CommitDeadline, ErrQuorumDeadline, cause))
			}
		}
		// On ctx's end every putCopy returns promptly; waiting for all of
		// them keeps the bytes alive until no upload reads them.
	}
}

// putCopy writes one copy, retrying transient failures until expired, and
// resolving ambiguous outcomes by reading the envelope back: our own nonce
// means the copy is ours.
// Every failed attempt is told to note.
func (l *loglet) putCopy(ctx context.Context, i int, key string, obj []byte, epoch, slot uint64, expired <-chan struct{}, note func(int, error)) putOutcome {
	b := l.cfg.Buckets[i]
	backoff := 5 * time.Millisecond
	for attempt := 0; ; attempt++ {
		start := l.s.clk.Now()
		err := b.PutIfAbsent(ctx, key, obj)
		l.m.bucketPut[i].Observe(l.s.clk.Now().Sub(start).Seconds())
		if err == nil {
			return putOutcome{bucket: i, ok: true}
		}
		if errors.Is(err, objstore.ErrExists) || errors.Is(err, objstore.ErrAmbiguous) {
			own, found, rerr := l.readBack(ctx, b, key, epoch, slot)
			switch {
			case rerr == nil && found && own:
				return putOutcome{bucket: i, ok: true}
			case rerr == nil && found:
				return putOutcome{bucket: i, foreign: true, err: ErrForeign}
			case rerr == nil && errors.Is(err, objstore.ErrExists):
				err = fmt.Errorf("put reported the key exists but a read finds nothing: %w", err)
			case rerr != nil:
				err = fmt.Errorf("%w; reading the envelope back: %v", err, rerr)
			}
		}
		if ctx.Err() != nil {
			return putOutcome{bucket: i, err: ctx.Err()}
		}
		note(i, fmt.Errorf("bucket %s: %w", b.Name(), err))
		select {
		case <-expired:
			return putOutcome{bucket: i, err: fmt.Errorf("bucket %s: %w", b.Name(), err)}
		case <-ctx.Done():
			return putOutcome{bucket: i, err: ctx.Err()}
		case <-l.s.clk.After(backoff):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

// putFailed counts a failed slot PUT attempt in
// strand_put_errors_total{class,bucket,kind}.
func (l *loglet) putFailed(i int, err error) {
	kind := "other"
	switch {
	case errors.Is(err, objstore.ErrAmbiguous):
		kind = "ambiguous"
	case errors.Is(err, objstore.ErrUnavailable):
		kind = "unavailable"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		kind = "read_only"
	}
	l.s.reg.Counter("strand_put_errors_total", "Failed slot PUT attempts (each is retried until the commit deadline), by bucket and kind.",
		"class", l.class.String(), "bucket", itoa(i)+":"+l.cfg.Buckets[i].Name(), "kind", kind).Inc()
}

// readBack classifies the occupant of key: ours (a flight with our epoch,
// slot and nonce), foreign, or absent.
func (l *loglet) readBack(ctx context.Context, b objstore.Bucket, key string, epoch, slot uint64) (own, found bool, err error) {
	head, err := b.Get(ctx, key, 0, format.EnvelopeSize)
	if errors.Is(err, objstore.ErrNotFound) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	env, perr := format.ParseEnvelope(head)
	if perr != nil {
		// Unreadable junk at our key is not our write.
		return false, true, nil
	}
	l.mu.Lock()
	nonce := l.nonce
	l.mu.Unlock()
	return env.Kind == format.KindFlight && env.Epoch == epoch && env.Slot == slot && env.Nonce == nonce, true, nil
}

// ProveConditionalWrites checks that b enforces put-if-absent: a probe key
// written twice must be refused the second time. Emulators have got this
// wrong; the star refuses to run on a bucket that does not enforce it.
func ProveConditionalWrites(ctx context.Context, b objstore.Bucket, star string, rnd io.Reader) error {
	var tag [8]byte
	if _, err := io.ReadFull(rnd, tag[:]); err != nil {
		return err
	}
	key := fmt.Sprintf("probes/%s/%x", star, tag)
	first, second := []byte("strand conditional-write probe 1"), []byte("strand conditional-write probe 2")
	if err := b.PutIfAbsent(ctx, key, first); err != nil {
		return fmt.Errorf("conditional-write probe: first put of %s: %w", key, err)
	}
	defer b.Delete(context.WithoutCancel(ctx), key)
	err := b.PutIfAbsent(ctx, key, second)
	if err == nil {
		return fmt.Errorf("conditional-write probe: a second put-if-absent of %s succeeded: %w, and strand cannot run on it safely", key, ErrNoConditionalWrites)
	}
	if !errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("conditional-write probe: second put of %s: %w", key, err)
	}
	got, err := b.Get(ctx, key, 0, -1)
	if err != nil {
		return fmt.Errorf("conditional-write probe: read back %s: %w", key, err)
	}
	if !bytes.Equal(got, first) {
		return fmt.Errorf("conditional-write probe: %s was overwritten by a refused put: %w", key, ErrNoConditionalWrites)
	}
	return nil
}
