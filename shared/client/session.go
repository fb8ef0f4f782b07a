package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// AppendSession pipelines appends to one stream: Submit sends a batch
// without waiting; acks come back in submission order through Acks.
// Submit blocks when the server applies backpressure.
type AppendSession struct {
	name   string
	stream *connect.BidiStreamForClient[strandv1.AppendRequest, strandv1.AppendResponse]
	acks   chan AckOrErr
	cancel context.CancelFunc
	done   chan struct{} // closed when the receive goroutine returns
	sendMu sync.Mutex
}

// AckOrErr is one result of an append session: an ack, or the error that
// ended the session (after which nothing more comes).
type AckOrErr struct {
	Ack
	Err error
}

// OpenAppendSession opens a session at the stream's leader.
func (c *Client) OpenAppendSession(ctx context.Context, name string) (*AppendSession, error) {
	if _, err := c.CheckTail(ctx, name); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	bs := c.api(c.baseFor(name)).AppendSession(ctx)
	s := &AppendSession{name: name, stream: bs, acks: make(chan AckOrErr, 64), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.acks)
		for {
			m, err := bs.Receive()
			r := AckOrErr{Err: err}
			if err == nil {
				r = AckOrErr{Ack: ackOf(m)}
			} else if errors.Is(err, io.EOF) {
				return
			}
			// Every send gives way to Close: acks nobody reads must not
			// hold the goroutine.
			select {
			case s.acks <- r:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return s, nil
}

// Submit sends one batch.
func (s *AppendSession) Submit(recs []Record, opt AppendOptions) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(appendReq(s.name, recs, opt))
}

// Acks delivers the acks in submission order; it is closed after the
// session ends (CloseSend and all acks received, or an error).
func (s *AppendSession) Acks() <-chan AckOrErr { return s.acks }

// CloseSend says no more batches come; the acks of those sent still arrive.
func (s *AppendSession) CloseSend() error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.CloseRequest()
}

// Close abandons the session: acks not yet read are dropped, and Close
// returns once the session's goroutine has.
func (s *AppendSession) Close() {
	s.cancel()
	_ = s.stream.CloseRequest()
	_ = s.stream.CloseResponse()
	<-s.done
}

// SessionOptions configure a read session.
type SessionOptions struct {
	// Count and Bytes bound the whole session (0: unbounded).
	Count, Bytes uint64
	// NoTail ends the session at the tail.
	NoTail bool
	// Heartbeat is the idle interval between heartbeats (0: server default).
	Heartbeat time.Duration
	// NoResume: end the session on a retriable error (a restart, a
	// takeover, a dropped connection) instead of reopening it after the
	// last record delivered (the default, within the client's Retry
	// budget per outage).
	NoResume bool
	// OnResume, if set, is told of every reopen (the CLI prints a notice).
	OnResume func(fromSeq uint64, cause error)
}

// ReadBatch is one message of a read session.
type ReadBatch struct {
	Records   []Record
	Tail      Tail
	Heartbeat bool
}

// ReadSession reads history, then tails live.
type ReadSession struct {
	stream *connect.ServerStreamForClient[strandv1.ReadSessionResponse]
	cur    ReadBatch
	err    error
	resume resumer
}

// OpenReadSession opens a read session at the stream's leader.
func (c *Client) OpenReadSession(ctx context.Context, name string, start Start, opt SessionOptions) (*ReadSession, error) {
	if _, err := c.CheckTail(ctx, name); err != nil {
		return nil, err
	}
	req := readRequest(name, start, opt)
	ss, err := c.api(c.baseFor(name)).ReadSession(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, transportError(err)
	}
	return &ReadSession{stream: ss, resume: resumer{c: c, ctx: ctx, name: name, req: req, opt: opt}}, nil
}

func readRequest(name string, start Start, opt SessionOptions) *strandv1.ReadSessionRequest {
	req := &strandv1.ReadSessionRequest{Stream: name, Count: opt.Count, Bytes: opt.Bytes, NoTail: opt.NoTail,
		HeartbeatMs: uint32(opt.Heartbeat / time.Millisecond)}
	switch start.kind {
	case 0:
		req.Start = &strandv1.ReadSessionRequest_SeqNum{SeqNum: start.v}
	case 1:
		req.Start = &strandv1.ReadSessionRequest_TimestampMs{TimestampMs: int64(start.v)}
	case 2:
		req.Start = &strandv1.ReadSessionRequest_TailOffset{TailOffset: start.v}
	}
	return req
}

// Records reads stream name from start, record by record: the recommended
// way to read. With opt.NoTail it ends at the tail as of the read;
// without, it follows the tail (records as they are acknowledged) until
// ctx ends, opt.Count is reached, or the loop breaks. A restart, a
// takeover or a dropped connection resumes after the last record yielded,
// as ReadSession does. An error ends it, yielded once with a zero Record
// (ctx's error too, when ctx ends a tailing read).
func (c *Client) Records(ctx context.Context, name string, start Start, opt SessionOptions) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		rs, err := c.OpenReadSession(ctx, name, start, opt)
		if err != nil {
			yield(Record{}, err)
			return
		}
		defer rs.Close()
		for rs.Next() {
			for _, r := range rs.Batch().Records {
				if !yield(r, nil) {
					return
				}
			}
		}
		if err := rs.Err(); err != nil {
			yield(Record{}, err)
		}
	}
}

// Next waits for the next batch (records or a heartbeat); false when the
// session ended (see Err).
//
// Unless SessionOptions.NoResume, a retriable end (Unavailable, a dropped
// connection) reopens the session right after the last record it
// delivered: no gap, no repeat. Once the session delivered its Count, such
// an end is the session's normal end (Err nil).
func (r *ReadSession) Next() bool {
	if r.err != nil {
		return false
	}
	if r.stream == nil { // a TailSession's first open
		ss, err := r.resume.reopen(nil)
		if err != nil {
			r.err = err
			return false
		}
		r.stream = ss
	}
	for !r.stream.Receive() {
		err := transportError(r.stream.Err())
		if r.resume.done() && Retriable(err) {
			// The session delivered its Count: a restart or a dropped
			// connection before its end of stream ends nothing.
			err = nil
		}
		if err == nil || !Retriable(err) || r.resume.opt.NoResume || r.resume.done() {
			r.err = err
			return false
		}
		ss, rerr := r.resume.reopen(err)
		if rerr != nil {
			r.err = rerr
			return false
		}
		_ = r.stream.Close()
		r.stream = ss
	}
	m := r.stream.Msg()
	r.cur = ReadBatch{Records: recordsOf(m.Records), Tail: Tail{NextSeq: m.NextSeqNum, LastTsMs: m.LastTimestampMs}, Heartbeat: m.Heartbeat}
	r.resume.delivered(r.cur.Records)
	return true
}

// Batch is the current batch.
func (r *ReadSession) Batch() ReadBatch { return r.cur }

// Err is the error that ended the session (nil at a normal end).
func (r *ReadSession) Err() error { return r.err }

// Close ends the session.
func (r *ReadSession) Close() error {
	if r.stream == nil {
		return nil
	}
	return r.stream.Close()
}
