package client

import (
	"context"
	"time"
)

// TailOptions configure a TailSession.
type TailOptions struct {
	SessionOptions
	// OnEnd, if set, hears each session that ended with a retriable error
	// before the TailSession reopens (for logs and metrics).
	OnEnd func(err error)
	// MaxBackoff caps the pause between reopens (0: 2 s); the first is
	// 50 ms, doubling while the reopens fail.
	MaxBackoff time.Duration
}

// TailSession is a ReadSession that survives restarts: when its session
// ends with a retriable error (a drain on SIGTERM ends every session with
// unavailable), it reopens after the last record it delivered, at the
// stream's leader, until ctx ends or an error is not retriable. Records
// arrive once each, in seq order, across reopens. Count and Bytes of its
// options bound each underlying session, not the whole TailSession.
type TailSession struct {
	c    *Client
	ctx  context.Context
	name string
	opt  TailOptions
	next Start
	rs   *ReadSession
	cur  ReadBatch
	err  error
}

// OpenTailSession starts a TailSession at start. The first session opens
// on the first Next.
func (c *Client) OpenTailSession(ctx context.Context, name string, start Start, opt TailOptions) *TailSession {
	return &TailSession{c: c, ctx: ctx, name: name, opt: opt, next: start}
}

// Next waits for the next batch (records or a heartbeat); false when the
// TailSession ended (see Err): ctx ended, or an error not retriable, or a
// session ended cleanly (NoTail, Count or Bytes reached).
func (t *TailSession) Next() bool {
	wait := 50 * time.Millisecond
	maxWait := t.opt.MaxBackoff
	if maxWait <= 0 {
		maxWait = 2 * time.Second
	}
	for t.err == nil {
		if t.rs == nil {
			// The TailSession resumes itself (and tells OnEnd of each end),
			// so its sessions do not.
			so := t.opt.SessionOptions
			so.NoResume = true
			rs, err := t.c.OpenReadSession(t.ctx, t.name, t.next, so)
			if err != nil {
				if t.retry(err, &wait, maxWait) {
					continue
				}
				return false
			}
			t.rs = rs
		}
		if t.rs.Next() {
			t.cur = t.rs.Batch()
			if n := len(t.cur.Records); n > 0 {
				t.next = FromSeq(t.cur.Records[n-1].Seq + 1)
			}
			wait = 50 * time.Millisecond
			return true
		}
		err := t.rs.Err()
		_ = t.rs.Close()
		t.rs = nil
		if err == nil {
			return false // a bounded session's clean end
		}
		if t.opt.OnEnd != nil && Retriable(err) {
			t.opt.OnEnd(err)
		}
		if !t.retry(err, &wait, maxWait) {
			return false
		}
	}
	return false
}

// retry pauses before a reopen if err is retriable; otherwise it records
// err as the end.
func (t *TailSession) retry(err error, wait *time.Duration, maxWait time.Duration) bool {
	if !Retriable(err) || t.ctx.Err() != nil {
		t.err = err
		return false
	}
	select {
	case <-t.ctx.Done():
		t.err = t.ctx.Err()
		return false
	case <-time.After(*wait):
	}
	*wait = min(2**wait, maxWait)
	return true
}

// Batch is the current batch.
func (t *TailSession) Batch() ReadBatch { return t.cur }

// Err is the error that ended the TailSession (nil at a clean end).
func (t *TailSession) Err() error { return t.err }

// Close ends the current session.
func (t *TailSession) Close() error {
	if t.rs == nil {
		return nil
	}
	err := t.rs.Close()
	t.rs = nil
	return err
}
