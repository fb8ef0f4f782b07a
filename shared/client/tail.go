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

// TailSession is a ReadSession that survives restarts for as long as it
// takes: when its session ends with a retriable error (a drain on SIGTERM
// ends every session with unavailable), it reopens after the last record
// it delivered, at the stream's leader, until ctx ends or an error is not
// retriable, where a ReadSession gives up after the client's Retry
// budget. Records arrive once each, in seq order, across reopens. Count
// and Bytes of its options bound the whole TailSession, as a
// ReadSession's. Both resume through the same code (resumer).
type TailSession struct {
	rs *ReadSession
}

// OpenTailSession starts a TailSession at start. The first session opens
// on the first Next (its retriable errors are retried, too).
func (c *Client) OpenTailSession(ctx context.Context, name string, start Start, opt TailOptions) *TailSession {
	opt.NoResume = false
	return &TailSession{rs: &ReadSession{resume: resumer{c: c, ctx: ctx, name: name, req: readRequest(name, start, opt.SessionOptions), opt: opt.SessionOptions, tail: &opt}}}
}

// Next waits for the next batch (records or a heartbeat); false when the
// TailSession ended (see Err): ctx ended, or an error not retriable, or
// the session ended cleanly (NoTail, Count or Bytes reached).
func (t *TailSession) Next() bool { return t.rs.Next() }

// Batch is the current batch.
func (t *TailSession) Batch() ReadBatch { return t.rs.Batch() }

// Err is the error that ended the TailSession (nil at a clean end).
func (t *TailSession) Err() error { return t.rs.Err() }

// Close ends the current session.
func (t *TailSession) Close() error { return t.rs.Close() }
