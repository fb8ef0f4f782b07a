package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// ProducerWindow is how many batches a ProducerSession keeps unacknowledged:
// no more than the server's dedupe window (8), so every batch it resends
// after a reconnect is still remembered there.
const ProducerWindow = 8

// ParseProducerID parses 32 hex digits.
func ParseProducerID(s string) (ProducerID, error) {
	var p ProducerID
	if len(s) != 32 {
		return p, fmt.Errorf("client: producer id %q: want 32 hex digits", s)
	}
	if _, err := hex.Decode(p[:], []byte(s)); err != nil || p == (ProducerID{}) {
		return p, fmt.Errorf("client: producer id %q: want 32 hex digits, not all zero", s)
	}
	return p, nil
}

// String is the id as 32 hex digits.
func (p ProducerID) String() string { return hex.EncodeToString(p[:]) }

// ProducerOptions configure a ProducerSession.
type ProducerOptions struct {
	// Producer resumes a named producer at FirstBatchSeq (its next batch
	// seq on the stream); nil draws a random producer starting at 0.
	Producer      *ProducerID
	FirstBatchSeq uint64
	// OnReconnect, if set, is told of every reconnect and its cause.
	OnReconnect func(cause error)
	// FenceToken is the fencing token every batch carries (see
	// Client.Fence); "" for a stream that is not fenced.
	FenceToken string
}

type unacked struct {
	seq  uint64
	recs []Record
	f    *Future
	ack  bool // Submit's: its ack is queued for Acks whenever Acks is read
}

// Future is the outcome of one batch of a ProducerSession: its ack, or the
// error that ended the session before it. The session resolves it on its
// own goroutine: nothing needs to be read for it to arrive.
type Future struct {
	done chan struct{}
	ack  Ack
	err  error
}

func newFuture() *Future { return &Future{done: make(chan struct{})} }

// resolve sets the outcome (once; the session calls it under its lock).
func (f *Future) resolve(a Ack, err error) {
	select {
	case <-f.done:
		return
	default:
	}
	f.ack, f.err = a, err
	close(f.done)
}

// Done is closed once the outcome is known.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait returns the batch's ack once it is durable, or the session's error;
// or ctx's error if ctx ends first (the batch's outcome is then still to
// come: Wait again, or resume the producer at the batch's seq).
func (f *Future) Wait(ctx context.Context) (Ack, error) {
	select {
	case <-f.done:
		return f.ack, f.err
	case <-ctx.Done():
		return Ack{}, ctx.Err()
	}
}

// ProducerSession is an exactly-once append session: each batch carries
// the session's producer id and the next batch seq; at most ProducerWindow
// batches are unacknowledged; on a retriable error (a restart, a takeover,
// a dropped connection, an outcome unknown) it reconnects within the
// client's Retry budget and resends the unacknowledged batches with their
// seqs, so the server answers those it already committed with their
// original acks.
//
// Append returns a Future per batch, resolved by the session's own
// goroutine: a caller that only appends and waits on its futures (or on
// Flush) cannot stall the session. Acks, for a caller that prefers one
// channel of every ack in submission order, is fed through a queue that
// never blocks the session either: reading it is optional.
type ProducerSession struct {
	c        *Client
	ctx      context.Context
	cancel   context.CancelFunc // Close
	readDone chan struct{}      // closed when read returns
	name     string
	opt      ProducerOptions
	id       ProducerID
	out      chan AckOrErr

	mu        sync.Mutex
	space     *sync.Cond
	sess      *AppendSession
	next      uint64 // next batch seq to assign
	pending   []unacked
	closeSend bool
	failed    error
	last      *Future // the last batch's (Flush)

	// The Acks channel's queue: acks delivered once Acks was called.
	acksOn  bool
	queue   []AckOrErr
	ended   bool // read returned: out closes once queue is empty
	queued  *sync.Cond
	acksRun sync.Once
}

// OpenProducerSession opens an exactly-once append session on stream name.
func (c *Client) OpenProducerSession(ctx context.Context, name string, opt ProducerOptions) (*ProducerSession, error) {
	ctx, cancel := context.WithCancel(ctx)
	p := &ProducerSession{c: c, ctx: ctx, cancel: cancel, readDone: make(chan struct{}), name: name, opt: opt, out: make(chan AckOrErr), next: opt.FirstBatchSeq}
	p.space = sync.NewCond(&p.mu)
	p.queued = sync.NewCond(&p.mu)
	if opt.Producer != nil {
		p.id = *opt.Producer
	} else {
		p.id = NewProducerID()
	}
	sess, err := p.open()
	if err != nil {
		cancel()
		return nil, err
	}
	p.sess = sess
	go p.read(sess)
	return p, nil
}

func (p *ProducerSession) open() (*AppendSession, error) {
	return retrying(p.ctx, p.c, true, func() (*AppendSession, error) {
		return p.c.OpenAppendSession(p.ctx, p.name)
	})
}

// Producer is the session's producer id.
func (p *ProducerSession) Producer() ProducerID { return p.id }

// NextBatchSeq is the batch seq the next Submit gets: resume the producer
// with it (ProducerOptions.FirstBatchSeq) once every ack has arrived.
func (p *ProducerSession) NextBatchSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// Append queues one batch and returns its Future. It blocks while
// ProducerWindow batches are unacknowledged (until the server acks one:
// never on the caller reading anything). It fails once the session has
// failed, or after CloseSend.
func (p *ProducerSession) Append(recs []Record) (*Future, error) {
	return p.append(recs, false)
}

func (p *ProducerSession) append(recs []Record, viaSubmit bool) (*Future, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.pending) >= ProducerWindow && p.failed == nil {
		p.space.Wait()
	}
	if p.failed != nil {
		return nil, p.failed
	}
	if p.closeSend {
		return nil, errors.New("client: append after CloseSend")
	}
	u := unacked{seq: p.next, recs: recs, f: newFuture(), ack: viaSubmit}
	p.next++
	p.pending = append(p.pending, u)
	p.last = u.f
	// A send error ends the session's receive side too: read reconnects
	// and resends everything pending, this batch included.
	_ = p.sess.Submit(recs, AppendOptions{Producer: &p.id, BatchSeq: u.seq, FenceToken: p.opt.FenceToken})
	return u.f, nil
}

// Submit is Append without the Future: its ack comes through Acks, read
// then or later (it waits in the queue; the session does not).
func (p *ProducerSession) Submit(recs []Record) error {
	_, err := p.append(recs, true)
	return err
}

// Flush waits until every batch appended so far is acknowledged, and
// returns the session's error if it failed first.
func (p *ProducerSession) Flush(ctx context.Context) error {
	p.mu.Lock()
	last, failed := p.last, p.failed
	p.mu.Unlock()
	if last == nil {
		return failed
	}
	_, err := last.Wait(ctx)
	return err
}

// Acks delivers in submission order the ack of every batch sent with
// Submit, and of those sent with Append once Acks was called; then, after
// an error, that error; it is closed after CloseSend once every batch is
// acknowledged, or after the error. The acks are queued for the reader:
// the session never waits for them, so reading late or not at all stalls
// nothing (unread acks of Submit's batches hold a few dozen bytes each).
func (p *ProducerSession) Acks() <-chan AckOrErr {
	p.acksRun.Do(func() {
		p.mu.Lock()
		p.acksOn = true
		p.mu.Unlock()
		go p.forward()
	})
	return p.out
}

// forward moves the queue to the Acks channel; it ends with the session's
// ctx (Close), so an Acks channel abandoned unread holds no goroutine.
func (p *ProducerSession) forward() {
	defer close(p.out)
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.ended {
			p.queued.Wait()
		}
		if len(p.queue) == 0 {
			p.mu.Unlock()
			return
		}
		a := p.queue[0]
		p.queue = p.queue[1:]
		p.mu.Unlock()
		select {
		case p.out <- a:
		case <-p.ctx.Done(): // Close (or the caller's ctx): nobody will read
			return
		}
	}
}

// deliver resolves u's future with a (under p.mu) and queues a for Acks.
func (p *ProducerSession) deliver(u unacked, a AckOrErr) {
	if u.f != nil {
		u.f.resolve(a.Ack, a.Err)
	}
	if u.ack || p.acksOn || a.Err != nil {
		p.queue = append(p.queue, a)
		p.queued.Broadcast()
	}
}

// CloseSend says no more batches come; the acks of those appended still
// arrive (their futures resolve, Acks delivers them, Flush waits for
// them).
func (p *ProducerSession) CloseSend() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeSend = true
	if len(p.pending) == 0 {
		return p.sess.CloseSend()
	}
	return nil
}

// Close abandons the session: batches not yet acknowledged may or may not
// be written (resume the producer at NextBatchSeq's batch to find out).
// After CloseSend and Flush, Close only frees the session.
// Close returns once the session's goroutine has: nothing of it is left.
func (p *ProducerSession) Close() {
	p.cancel()
	p.mu.Lock()
	sess := p.sess
	p.mu.Unlock()
	sess.Close()
	<-p.readDone
}

// read delivers acks and reconnects on retriable errors.
func (p *ProducerSession) read(sess *AppendSession) {
	defer close(p.readDone)
	defer func() {
		p.mu.Lock()
		p.ended = true
		p.queued.Broadcast()
		p.mu.Unlock()
	}()
	// idle counts the sessions in a row that ended without an ack: a
	// reconnect after one waits the client's backoff, so a server that
	// refuses sessions (resource_exhausted at its cap) is not asked again
	// as fast as the round trip.
	idle := 0
	for {
		var cause error
		for a := range sess.Acks() {
			if a.Err != nil {
				cause = a.Err
				break
			}
			idle = -1
			p.mu.Lock()
			if len(p.pending) == 0 {
				p.mu.Unlock()
				cause = errors.New("client: ack for no pending batch")
				break
			}
			u := p.pending[0]
			p.pending = p.pending[1:]
			p.space.Broadcast()
			last := p.closeSend && len(p.pending) == 0
			if last {
				_ = sess.CloseSend()
			}
			p.deliver(u, a)
			p.mu.Unlock()
		}
		p.mu.Lock()
		if cause == nil && len(p.pending) == 0 && p.closeSend {
			p.mu.Unlock()
			return // every batch acknowledged
		}
		if cause == nil {
			cause = fmt.Errorf("%w: the append session ended with %d batches unacknowledged", io.ErrUnexpectedEOF, len(p.pending))
		}
		cause = transportError(cause)
		p.mu.Unlock()
		if !Retriable(cause) && !errors.Is(cause, io.ErrUnexpectedEOF) || p.ctx.Err() != nil {
			p.fail(cause)
			return
		}
		if p.opt.OnReconnect != nil {
			p.opt.OnReconnect(cause)
		}
		sess.Close()
		if idle++; idle > 0 && !p.pause(idle-1) {
			p.fail(cause)
			return
		}
		next, err := p.open()
		if err != nil {
			p.fail(fmt.Errorf("client: reconnect after %v: %w", cause, err))
			return
		}
		p.mu.Lock()
		p.sess, sess = next, next
		for _, u := range p.pending {
			_ = sess.Submit(u.recs, AppendOptions{Producer: &p.id, BatchSeq: u.seq, FenceToken: p.opt.FenceToken})
		}
		if p.closeSend && len(p.pending) == 0 {
			_ = sess.CloseSend()
		}
		p.mu.Unlock()
	}
}

// pause waits the client's backoff before reconnect n (0-based) of
// sessions ending without an ack; false: the session's context ended.
func (p *ProducerSession) pause(n int) bool {
	t := time.NewTimer(p.c.retryPolicy().backoff(n))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// fail ends the session with err: every pending batch's future gets it,
// and Acks delivers it once.
func (p *ProducerSession) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = err
	p.space.Broadcast()
	for _, u := range p.pending {
		u.f.resolve(Ack{}, err)
	}
	p.deliver(unacked{}, AckOrErr{Err: err})
}
