package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
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
}

// ProducerSession is an exactly-once append session: each batch carries
// the session's producer id and the next batch seq; at most ProducerWindow
// batches are unacknowledged; on a retriable error (a restart, a takeover,
// a dropped connection, an outcome unknown) it reconnects within the
// client's Retry budget and resends the unacknowledged batches with their
// seqs, so the server answers those it already committed with their
// original acks. Acks come in submission order, each batch's once.
type ProducerSession struct {
	c    *Client
	ctx  context.Context
	name string
	opt  ProducerOptions
	id   ProducerID
	out  chan AckOrErr

	mu        sync.Mutex
	space     *sync.Cond
	sess      *AppendSession
	next      uint64 // next batch seq to assign
	pending   []unacked
	closeSend bool
	failed    error
}

// OpenProducerSession opens an exactly-once append session on stream name.
func (c *Client) OpenProducerSession(ctx context.Context, name string, opt ProducerOptions) (*ProducerSession, error) {
	p := &ProducerSession{c: c, ctx: ctx, name: name, opt: opt, out: make(chan AckOrErr, ProducerWindow+1), next: opt.FirstBatchSeq}
	p.space = sync.NewCond(&p.mu)
	if opt.Producer != nil {
		p.id = *opt.Producer
	} else {
		p.id = NewProducerID()
	}
	sess, err := p.open()
	if err != nil {
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

// Submit queues one batch; it blocks while ProducerWindow batches are
// unacknowledged. It fails once the session has failed.
func (p *ProducerSession) Submit(recs []Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.pending) >= ProducerWindow && p.failed == nil {
		p.space.Wait()
	}
	if p.failed != nil {
		return p.failed
	}
	if p.closeSend {
		return errors.New("client: submit after CloseSend")
	}
	u := unacked{seq: p.next, recs: recs}
	p.next++
	p.pending = append(p.pending, u)
	// A send error ends the session's receive side too: read reconnects
	// and resends everything pending, this batch included.
	_ = p.sess.Submit(recs, AppendOptions{Producer: &p.id, BatchSeq: u.seq, FenceToken: p.opt.FenceToken})
	return nil
}

// Acks delivers each batch's ack in submission order; it is closed after
// CloseSend once every batch is acknowledged, or after an error.
func (p *ProducerSession) Acks() <-chan AckOrErr { return p.out }

// CloseSend says no more batches come.
func (p *ProducerSession) CloseSend() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeSend = true
	if len(p.pending) == 0 {
		return p.sess.CloseSend()
	}
	return nil
}

// Close abandons the session.
func (p *ProducerSession) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sess.Close()
}

// read delivers acks and reconnects on retriable errors.
func (p *ProducerSession) read(sess *AppendSession) {
	defer close(p.out)
	for {
		var cause error
		for a := range sess.Acks() {
			if a.Err != nil {
				cause = a.Err
				break
			}
			p.mu.Lock()
			if len(p.pending) == 0 {
				p.mu.Unlock()
				cause = errors.New("client: ack for no pending batch")
				break
			}
			p.pending = p.pending[1:]
			p.space.Broadcast()
			last := p.closeSend && len(p.pending) == 0
			if last {
				_ = sess.CloseSend()
			}
			p.mu.Unlock()
			p.out <- a
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

func (p *ProducerSession) fail(err error) {
	p.mu.Lock()
	p.failed = err
	p.space.Broadcast()
	p.mu.Unlock()
	p.out <- AckOrErr{Err: err}
}
