package server

import (
	"context"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/star"
)

// parseProducer validates an append's idempotency fields: producer_id is
// absent or exactly 16 bytes, not all zero; batch_seq is given exactly when
// producer_id is. Failures are CodeInvalidArgument with the reason.
func parseProducer(m *strandv1.AppendRequest, a *AppendArgs) error {
	id := m.GetProducerId()
	switch {
	case len(id) == 0 && m.BatchSeq != nil:
		return invalid("batch_seq %d without producer_id", m.GetBatchSeq())
	case len(id) == 0:
		return nil
	case len(id) != len(a.Producer):
		return invalid("producer_id is %d bytes, want %d", len(id), len(a.Producer))
	case m.BatchSeq == nil:
		return invalid("producer_id without batch_seq")
	}
	copy(a.Producer[:], id)
	if a.Producer.IsZero() {
		return invalid("producer_id is all zero bytes")
	}
	a.BatchSeq = m.GetBatchSeq()
	return nil
}

// options are the star's append options for a.
func (a AppendArgs) options() star.AppendOptions {
	return star.AppendOptions{MatchSeq: a.MatchSeq, Producer: a.Producer, BatchSeq: a.BatchSeq, FenceToken: a.FenceToken}
}

// appendOptions are a's options for the star, with the caller's tenant
// (its root token: minting tokens does not add shares) as the tenant whose
// fair share of the pool the batch uses.
func (s *Server) appendOptions(ctx context.Context, a AppendArgs) star.AppendOptions {
	o := a.options()
	o.Tenant = s.grant(ctx).Tenant
	return o
}
