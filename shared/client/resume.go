package client

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// resumer reopens a read session after the last record it delivered. It
// is the one piece of code behind both resuming reads: a ReadSession's
// (tail nil: a retriable end reopens within the client's Retry budget per
// outage) and a TailSession's (tail set: it reopens until ctx ends or an
// error is not retriable, pausing 50 ms, doubling to MaxBackoff, and tells
// OnEnd of every end).
type resumer struct {
	c    *Client
	ctx  context.Context
	name string
	req  *strandv1.ReadSessionRequest
	opt  SessionOptions
	tail *TailOptions
	// wait is a TailSession's pause before its next reopen; every message
	// received resets it.
	wait time.Duration
	// after: a record was delivered; next is the seq after the last one.
	after bool
	next  uint64
	count uint64 // records delivered (the session's Count bound)
	bytes uint64
}

// done reports whether the session already delivered its Count.
func (r *resumer) done() bool { return r.opt.Count > 0 && r.count >= r.opt.Count }

// delivered books a message's records (and resets a TailSession's pause).
func (r *resumer) delivered(recs []Record) {
	r.wait = 0
	for _, rec := range recs {
		r.after, r.next = true, rec.Seq+1
		r.count++
		r.bytes += uint64(len(rec.Body))
	}
}

// open opens the session from the record after the last one delivered
// (from the original start if none was), with the session's remaining
// Count and Bytes, at the stream's leader.
func (r *resumer) open() (*connect.ServerStreamForClient[strandv1.ReadSessionResponse], error) {
	req := proto.Clone(r.req).(*strandv1.ReadSessionRequest)
	if r.after {
		req.Start = &strandv1.ReadSessionRequest_SeqNum{SeqNum: r.next}
	}
	if r.opt.Count > 0 {
		req.Count = r.opt.Count - min(r.count, r.opt.Count)
	}
	if r.opt.Bytes > 0 {
		req.Bytes = r.opt.Bytes - min(r.bytes, r.opt.Bytes)
	}
	if _, err := r.c.CheckTail(r.ctx, r.name); err != nil { // follows a moved leader
		return nil, err
	}
	return r.c.api(r.c.baseFor(r.name)).ReadSession(r.ctx, connect.NewRequest(req))
}

// reopen opens the session again after it ended with the retriable cause
// (nil: a TailSession's first open, without a pause).
func (r *resumer) reopen(cause error) (*connect.ServerStreamForClient[strandv1.ReadSessionResponse], error) {
	if cause != nil && r.opt.OnResume != nil {
		r.opt.OnResume(r.next, cause)
	}
	if r.tail == nil {
		return retrying(r.ctx, r.c, true, r.open)
	}
	if cause != nil && r.tail.OnEnd != nil {
		r.tail.OnEnd(cause)
	}
	maxWait := r.tail.MaxBackoff
	if maxWait <= 0 {
		maxWait = 2 * time.Second
	}
	for pause := cause != nil; ; pause = true {
		if pause {
			r.wait = max(r.wait, 50*time.Millisecond)
			t := time.NewTimer(r.wait)
			select {
			case <-r.ctx.Done():
				t.Stop()
				return nil, r.ctx.Err()
			case <-t.C:
			}
			r.wait = min(2*r.wait, maxWait)
		}
		ss, err := r.open()
		if err == nil {
			return ss, nil
		}
		if err = transportError(err); !Retriable(err) || r.ctx.Err() != nil {
			return nil, err
		}
	}
}
