package server

import (
	"context"
	"crypto/sha256"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/format"
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
// fair share of the pool the batch uses, and the producer id scoped to the
// caller's token (ScopeProducer).
func (s *Server) appendOptions(ctx context.Context, a AppendArgs) star.AppendOptions {
	o := a.options()
	g := s.grant(ctx)
	o.Tenant = g.Tenant
	if !o.Producer.IsZero() {
		o.Producer = ScopeProducer(g.Hash, o.Producer)
	}
	return o
}

// ScopeProducer is the producer id the star dedupes a batch under: the
// client's id scoped to the token that sent it (its hash), so that a
// batch is answered for, or deduplicated against, only batches of the
// same token: another principal that sends the same id and batch seq
// writes its own batch and never takes the owner's ack (issue 31, ADR
// 0048). It is a pure function of the two, so a successor star recovers
// the same ids from the stream's refs and exactly-once holds across a
// takeover. Without authentication (tokenHash "") the id is the client's.
func ScopeProducer(tokenHash string, id format.ProducerID) format.ProducerID {
	if tokenHash == "" {
		return id
	}
	h := sha256.New()
	h.Write([]byte("strand/producer\x00"))
	h.Write([]byte(tokenHash))
	h.Write(id[:])
	var out format.ProducerID
	copy(out[:], h.Sum(nil))
	if out.IsZero() {
		out[0] = 1 // the zero id means none
	}
	return out
}
