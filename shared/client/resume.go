package client

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/shared/api/strandv1"
)

// resumer reopens a read session after the last record it delivered.
type resumer struct {
	c    *Client
	ctx  context.Context
	name string
	req  *strandv1.ReadSessionRequest
	opt  SessionOptions
	// after: a record was delivered; next is the seq after the last one.
	after bool
	next  uint64
	count uint64 // records delivered (the session's Count bound)
	bytes uint64
}

// done reports whether the session already delivered its Count.
func (r *resumer) done() bool { return r.opt.Count > 0 && r.count >= r.opt.Count }

func (r *resumer) delivered(recs []Record) {
	for _, rec := range recs {
		r.after, r.next = true, rec.Seq+1
		r.count++
		r.bytes += uint64(len(rec.Body))
	}
}

// reopen opens the session again from the record after the last one
// delivered (from the original start if none was), with the session's
// remaining Count and Bytes, retrying within the client's Retry budget.
func (r *resumer) reopen(cause error) (*connect.ServerStreamForClient[strandv1.ReadSessionResponse], error) {
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
	if r.opt.OnResume != nil {
		r.opt.OnResume(r.next, cause)
	}
	return retrying(r.ctx, r.c.retryPolicy(), true, func() (*connect.ServerStreamForClient[strandv1.ReadSessionResponse], error) {
		if _, err := r.c.CheckTail(r.ctx, r.name); err != nil { // follows a moved leader
			return nil, err
		}
		return r.c.api(r.c.baseFor(r.name)).ReadSession(r.ctx, connect.NewRequest(req))
	})
}
