package server

import (
	"context"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
)

// Submit admits an append as Append does (the same checks, with the
// caller's grant from ctx) and returns without waiting for its ack: wait
// returns the ack (or the batch's failure). Appends submitted one after
// the other to a stream are sequenced and acknowledged in that order, as
// an append session's are. It serves in-process front ends that pipeline
// appends (shared/kafka); during a drain it is refused as Append is.
func (s *Server) Submit(ctx context.Context, m *strandv1.AppendRequest) (wait func(context.Context) (*strandv1.AppendResponse, error), err error) {
	if s.shutdown.refusing.Load() {
		return nil, s.drainErr()
	}
	a, err := ParseAppend(m)
	if err != nil {
		return nil, err
	}
	_, id, err := s.leading(ctx, auth.Append, a.Stream)
	if err != nil {
		return nil, err
	}
	if err := s.appendQuota(ctx, a.Stream, a.Records); err != nil {
		return nil, err // the tenant's append byte rate, as Append's
	}
	p, err := s.cfg.Star.Submit(ctx, id, a.Records, s.appendOptions(ctx, a))
	if err != nil {
		return nil, s.leaderNow(ctx, a.Stream, err)
	}
	return func(ctx context.Context) (*strandv1.AppendResponse, error) {
		ack, err := ackOrWait(ctx, p)
		if err != nil {
			return nil, toConnect(err)
		}
		return ackMsg(ack), nil
	}, nil
}
