package star

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Fencer is the chain backend the star needs to fence an epoch: classify
// slots from `from` upward, poison the first one that is not committed, and
// return it (the cut). shared/chain.Set implements it.
type Fencer interface {
	Fence(ctx context.Context, epoch, from uint64, nonce format.Nonce) (cut uint64, err error)
}

// Absorber brings a chain's checkpoint up to `to` (absorbing every committed
// slot below it into refs). The star calls it during takeover, before it
// mints its epoch, so that every stream's tail can be recovered from refs.
type Absorber interface {
	AbsorbTo(ctx context.Context, chain metastore.ChainID, to metastore.Cursor) error
}

// Backoff between takeover rounds when the mint is lost (see lead).
const (
	leadBackoffMin = 50 * time.Millisecond
	leadBackoffMax = 5 * time.Second
)

// lead takes the leadership of the loglet: mint the first epoch, or take
// over from the previous one (fence it, absorb up to its cut, mint the next).
//
// A lost mint means another star minted the epoch first: typically the old
// leader, deposed but alive, whose in-process recovery minted between our
// fence and our mint. lead then takes over again (fencing that epoch too),
// with a bounded, jittered backoff, until it wins or ctx ends: it never
// gives up while the old leader keeps minting. The old leader sheds once it
// finds its epoch fenced by someone else (tryRecover), so the rounds end.
func (l *loglet) lead(ctx context.Context) error {
	meta := l.s.meta
	backoff := leadBackoffMin
	for attempt := 1; ; attempt++ {
		head, err := meta.GetHead(ctx, l.chain)
		prev := uint64(0)
		switch {
		case errors.Is(err, metastore.ErrNotFound):
		case err != nil:
			return fmt.Errorf("star: %s: read chain head: %w", l.chain, err)
		default:
			if err := l.takeover(ctx, head); err != nil {
				return err
			}
			prev = head.Epoch
		}
		nonce, err := l.s.newNonce()
		if err != nil {
			return err
		}
		e := l.epochRecord(prev+1, nonce)
		err = l.mint(ctx, prev, e)
		if errors.Is(err, metastore.ErrConflict) {
			// Another star minted first: it leads unless we take over again.
			wait := backoff + l.s.jitter(backoff)
			l.s.log.Warn("epoch mint lost a race; taking over again", "chain", l.chain.String(), "epoch", e.Epoch, "attempt", attempt, "in", wait.String())
			select {
			case <-ctx.Done():
				return fmt.Errorf("star: %s: %w: lost the epoch mint %d times to another star: %w", l.chain, ErrNotLeader, attempt, ctx.Err())
			case <-l.s.clk.After(wait):
			}
			backoff = min(2*backoff, leadBackoffMax)
			continue
		}
		if err != nil {
			return fmt.Errorf("star: %s: mint epoch %d: %w", l.chain, e.Epoch, err)
		}
		l.mu.Lock()
		l.epoch, l.nonce = e.Epoch, nonce
		l.ord = newOrder(0, l.cfg.ParallelUploads)
		l.mu.Unlock()
		l.s.log.Info("leading chain", "chain", l.chain.String(), "epoch", e.Epoch, "K", len(l.cfg.Buckets), "W", l.cfg.W)
		return nil
	}
}

// mint mints e after prev. A mint whose answer was lost (ErrUnavailable)
// may have landed, and its retry would then fail as a conflict: so on
// either, the epoch record is read back, and our own nonce on it means the
// mint is ours.
func (l *loglet) mint(ctx context.Context, prev uint64, e metastore.Epoch) error {
	err := l.s.meta.MintEpoch(ctx, l.chain, prev, e)
	if err == nil || !(errors.Is(err, metastore.ErrConflict) || errors.Is(err, metastore.ErrUnavailable)) {
		return err
	}
	for attempt := 0; attempt < 5; attempt++ {
		got, gerr := l.s.meta.GetEpoch(ctx, l.chain, e.Epoch)
		switch {
		case gerr == nil && got.Nonce == e.Nonce:
			return nil // our mint landed; its answer was lost
		case gerr == nil:
			return fmt.Errorf("epoch %d was minted by another star: %w", e.Epoch, metastore.ErrConflict)
		case errors.Is(gerr, metastore.ErrNotFound) && errors.Is(err, metastore.ErrConflict):
			return err // not ours, and not landed: a real conflict
		case errors.Is(gerr, metastore.ErrNotFound):
			// The mint whose answer was lost did not land: mint again.
			err = l.s.meta.MintEpoch(ctx, l.chain, prev, e)
			if err == nil || !(errors.Is(err, metastore.ErrConflict) || errors.Is(err, metastore.ErrUnavailable)) {
				return err
			}
			continue // read back again
		}
		select { // the read failed: wait and read again
		case <-ctx.Done():
			return ctx.Err()
		case <-l.s.clk.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	return err
}

func (l *loglet) epochRecord(epoch uint64, nonce format.Nonce) metastore.Epoch {
	names := l.cfg.BucketNames
	if len(names) == 0 {
		for _, b := range l.cfg.Buckets {
			names = append(names, b.Name())
		}
	}
	return metastore.Epoch{Epoch: epoch, State: metastore.EpochActive, K: len(l.cfg.Buckets), W: l.cfg.W,
		Buckets: slices.Clone(names), Window: l.cfg.ParallelUploads, Nonce: nonce}
}

// takeover fences the head's epoch, records its cut, and absorbs up to it.
func (l *loglet) takeover(ctx context.Context, head metastore.Head) error {
	cut, _, err := l.fenceAndRecord(ctx, head.Epoch, head.Checkpoint)
	if err != nil {
		return err
	}
	if l.s.absorber != nil {
		if err := l.s.absorber.AbsorbTo(ctx, l.chain, metastore.Cursor{Epoch: head.Epoch, Slot: cut}); err != nil {
			return fmt.Errorf("star: %s: absorb epoch %d up to its cut %d before serving: %w", l.chain, head.Epoch, cut, err)
		}
	}
	return nil
}

// fenceAndRecord fences epoch from the checkpoint (or slot 0) and records
// the cut on the epoch record. Two fencers compute the same cut. other
// reports that another star recorded it: the epoch was found fenced though
// this loglet never tried to record its cut, or our record lost the CAS.
func (l *loglet) fenceAndRecord(ctx context.Context, epoch uint64, checkpoint metastore.Cursor) (cut uint64, other bool, err error) {
	rec, err := l.s.meta.GetEpoch(ctx, l.chain, epoch)
	if err != nil {
		return 0, false, fmt.Errorf("star: %s: read epoch %d: %w", l.chain, epoch, err)
	}
	l.mu.Lock()
	tried := l.cutTried == epoch && epoch != 0
	l.mu.Unlock()
	if rec.State == metastore.EpochFenced {
		return rec.Cut, !tried, nil
	}
	if l.s.fencer == nil {
		return 0, false, fmt.Errorf("star: %s: epoch %d needs a fence but the star has no fencer", l.chain, epoch)
	}
	from := uint64(0)
	if checkpoint.Epoch == epoch {
		from = checkpoint.Slot
	}
	nonce, err := l.s.newNonce()
	if err != nil {
		return 0, false, err
	}
	cut, err = l.s.fencer(l).Fence(ctx, epoch, from, nonce)
	if err != nil {
		return 0, false, fmt.Errorf("star: %s: fence epoch %d: %w", l.chain, epoch, err)
	}
	rec.State, rec.Cut = metastore.EpochFenced, cut
	l.mu.Lock()
	l.cutTried = epoch // a record whose answer is lost may have landed: ours
	l.mu.Unlock()
	if err := l.s.meta.UpdateEpoch(ctx, l.chain, metastore.EpochActive, rec); err != nil {
		if !errors.Is(err, metastore.ErrConflict) && !errors.Is(err, metastore.ErrInvalid) {
			return 0, false, fmt.Errorf("star: %s: record cut %d of epoch %d: %w", l.chain, cut, epoch, err)
		}
		again, gerr := l.s.meta.GetEpoch(ctx, l.chain, epoch)
		if gerr != nil {
			return 0, false, fmt.Errorf("star: %s: re-read epoch %d: %w", l.chain, epoch, gerr)
		}
		if again.State != metastore.EpochFenced || again.Cut != cut {
			panic(fmt.Sprintf("star: %s: two fencers of epoch %d disagree on the cut: %d and %d", l.chain, epoch, cut, again.Cut))
		}
		other = true
	}
	l.s.log.Info("fenced epoch", "chain", l.chain.String(), "epoch", epoch, "cut", cut)
	if l.s.onFenced != nil {
		l.s.onFenced(l.chain, epoch, cut, rec.Window)
	}
	return cut, other, nil
}

// recoverFrom is the star's answer to its own halt: fence the epoch, mint
// the next, ack late what the fence found committed, republish the rest.
// Producers see latency, not errors. Losing the mint means a successor
// exists: the loglet sheds leadership.
func (l *loglet) recoverFrom(ctx context.Context, epoch uint64) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ctx.Err() == nil; attempt++ {
		err := l.tryRecover(ctx, epoch)
		if err == nil {
			return
		}
		if errors.Is(err, ErrNotLeader) {
			l.shed(err)
			return
		}
		l.s.log.Error("epoch recovery failed; retrying", "chain", l.chain.String(), "epoch", epoch, "attempt", attempt, "err", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-l.s.clk.After(backoff):
		}
		backoff = min(backoff*2, 5000*time.Millisecond)
	}
}

// tryRecover makes one recovery attempt. It stops (returns nil) once the
// loglet is closed: Close has failed every pending batch, so nothing may be
// acked late or republished after it.
func (l *loglet) tryRecover(ctx context.Context, epoch uint64) error {
	l.mu.Lock()
	if l.closed || l.epoch != epoch || l.halted == nil {
		l.mu.Unlock()
		return nil
	}
	base := l.ord.base
	l.mu.Unlock()
	// The fence starts at the first unreleased slot or the checkpoint,
	// whichever is later: a sweep may absorb committed slots before their
	// acks release, and settle and trim may then delete them. Fencing from
	// below the checkpoint would find those slots empty, poison them, and
	// republish flights whose seqs refs already hold.
	from := metastore.Cursor{Epoch: epoch, Slot: base}
	head, err := l.s.meta.GetHead(ctx, l.chain)
	if err != nil {
		return fmt.Errorf("star: %s: read chain head: %w", l.chain, err)
	}
	if head.Checkpoint.Epoch == epoch && head.Checkpoint.Slot > base {
		from.Slot = head.Checkpoint.Slot
	}
	cut, other, err := l.fenceAndRecord(ctx, epoch, from)
	if err != nil {
		return err
	}
	if other {
		// Another star fenced our epoch: a successor is taking over. Minting
		// now would race its mint (and could win, deposing it in turn):
		// ack what is committed below the cut and shed instead.
		l.lateAcks(epoch, cut)
		return fmt.Errorf("star: %s: epoch %d was fenced by another star (cut %d): %w", l.chain, epoch, cut, ErrNotLeader)
	}
	nonce, err := l.s.newNonce()
	if err != nil {
		return err
	}
	rec := l.epochRecord(epoch+1, nonce)
	if err := l.mint(ctx, epoch, rec); err != nil {
		if errors.Is(err, metastore.ErrConflict) {
			l.lateAcks(epoch, cut)
			return fmt.Errorf("star: %s: epoch %d has a successor: %w", l.chain, epoch, ErrNotLeader)
		}
		return fmt.Errorf("star: %s: mint epoch %d: %w", l.chain, epoch+1, err)
	}
	l.mu.Lock()
	if l.closed {
		// Closed between the fence and here: the minted epoch stays
		// unused (a successor fences it at slot 0).
		l.mu.Unlock()
		return nil
	}
	now := l.s.clk.Now()
	l.releaseBelow(cut, now)
	var rest []*flight
	for s := cut; s < l.ord.next; s++ {
		if f := l.inflight[s]; f != nil {
			rest = append(rest, f)
		}
	}
	l.epoch, l.nonce = epoch+1, nonce
	l.ord = newOrder(0, l.cfg.ParallelUploads)
	l.inflight = map[uint64]*flight{}
	var again []*flight
	for _, old := range rest {
		// A republished flight keeps its carried tables: their batches
		// were released before it was first cut, below its seqs.
		nf := &flight{epoch: l.epoch, slot: l.ord.claim(), batches: old.batches, bytes: old.bytes, carried: old.carried, cutAt: now, builder: format.NewBuilder()}
		l.inflight[nf.slot] = nf
		again = append(again, nf)
	}
	l.halted, l.haltExpired = nil, false
	l.recarry() // the disowned flights may have held the newest tables
	l.broadcast()
	l.mu.Unlock()
	l.s.log.Info("epoch recovered", "chain", l.chain.String(), "halted_epoch", epoch, "cut", cut, "acked_late", cut-base, "republished", len(again), "epoch", epoch+1)
	for _, nf := range again {
		nf.setObj(render(nf.builder, nf.epoch, nf.slot, nonce, nf.batches, nf.carried))
		go l.commit(ctx, nf)
	}
	l.notify()
	return nil
}

// releaseBelow acks, in order, the in-flight flights of the current epoch
// below cut: the fence found them committed. Called with l.mu held.
func (l *loglet) releaseBelow(cut uint64, now time.Time) {
	for s := l.ord.base; s < cut && s < l.ord.next; s++ {
		f := l.inflight[s]
		delete(l.inflight, s)
		if f != nil {
			f.durable = true
			l.release(f, now)
		}
	}
}

// lateAcks acks what the fence found committed when a successor exists.
func (l *loglet) lateAcks(epoch, cut uint64) {
	l.mu.Lock()
	if l.epoch == epoch && !l.closed {
		l.releaseBelow(cut, l.s.clk.Now())
		l.broadcast()
	}
	l.mu.Unlock()
	l.notify()
}

// shed gives up the loglet: a successor leads. Pending batches that did not
// commit fail with ErrNotLeader; nothing acked is affected.
func (l *loglet) shed(why error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deposed != nil || l.closed {
		return // closed: Close already failed every pending batch
	}
	l.deposed = why
	l.s.log.Error("leadership lost: a successor leads this chain", "chain", l.chain.String(), "err", why.Error())
	l.pool.each(func(b *batch) { b.finish(Ack{}, why) })
	l.pool.drop()
	for s, f := range l.inflight {
		for _, b := range f.batches {
			b.finish(Ack{}, why)
		}
		delete(l.inflight, s)
	}
	l.broadcast()
}

// notify wakes the release notifier.
func (l *loglet) notify() {
	select {
	case l.relSignal <- struct{}{}:
	default:
	}
}
