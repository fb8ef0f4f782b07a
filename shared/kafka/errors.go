package kafka

import (
	"errors"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/star"
)

// Kafka error codes the front end answers with (kerr has them all).
var (
	errUnsupportedVersion = kerr.UnsupportedVersion.Code
)

// code maps a strand API error to the Kafka error code a client acts on
// the same way: retriable where strand says retry, fatal where it says
// the request is wrong.
func code(err error) int16 {
	if err == nil {
		return 0
	}
	if errors.Is(err, ErrBatchTooLarge) {
		return kerr.MessageTooLarge.Code
	}
	if errors.Is(err, ErrSequence) {
		return kerr.OutOfOrderSequenceNumber.Code
	}
	if errors.Is(err, ErrTransactional) {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	if errors.Is(err, ErrBatch) || errors.Is(err, ErrDecompress) {
		return kerr.CorruptMessage.Code
	}
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		return kerr.UnknownTopicOrPartition.Code
	case connect.CodePermissionDenied, connect.CodeUnauthenticated:
		return kerr.TopicAuthorizationFailed.Code
	case connect.CodeInvalidArgument:
		return kerr.InvalidRecord.Code
	case connect.CodeAlreadyExists:
		return kerr.TopicAlreadyExists.Code
	case connect.CodeUnavailable:
		if notLeader(err) || moved(err) {
			return kerr.NotLeaderForPartition.Code
		}
		return kerr.RequestTimedOut.Code
	case connect.CodeFailedPrecondition:
		if errors.Is(err, star.ErrBatchSeqGap) || errors.Is(err, star.ErrBatchSeqTooOld) {
			return kerr.OutOfOrderSequenceNumber.Code
		}
		return kerr.InvalidRequest.Code
	case connect.CodeAborted, connect.CodeDeadlineExceeded, connect.CodeCanceled:
		// The outcome is unknown: a retriable code, and an idempotent
		// producer's retry is answered from the dedupe window.
		return kerr.RequestTimedOut.Code
	case connect.CodeResourceExhausted:
		return kerr.ThrottlingQuotaExceeded.Code
	}
	return kerr.UnknownServerError.Code
}

// message is err's text for a response's error message field.
func message(err error) *string {
	if err == nil {
		return nil
	}
	m := err.Error()
	return &m
}

// notLeader reports whether err is the strand API's answer that another
// star leads the stream (its Leader detail).
func notLeader(err error) bool {
	_, ok := leaderOf(err)
	return ok
}

// leaderOf is the star err's Leader detail names, if it has one.
func leaderOf(err error) (string, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return "", false
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if l, ok := v.(*strandv1.Leader); ok {
				return l.Star, true
			}
		}
	}
	return "", false
}

// drained reports whether err is this star's drain refusing an append
// before admitting it: unavailable with the Leader detail naming this
// star itself, since its successor takes the same id over (the strand
// server's ErrShuttingDown). Nothing of that append was written.
func (s *Server) drained(err error) bool {
	l, ok := leaderOf(err)
	return ok && l == s.cfg.Star
}

// moved reports whether err refuses a batch for a stream sealed for a
// move to another star (ADR 0065). The front end calls the server in
// process, past the interceptor that adds the Leader detail to such an
// answer, so the sentinel is what it sees: the client refreshes its
// metadata, which names the new leader once the move is written.
func moved(err error) bool { return errors.Is(err, star.ErrMoved) }

func errorsIsOffset(err error) bool { return errors.Is(err, ErrOffset) }
