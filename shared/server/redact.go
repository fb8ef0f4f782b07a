package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"connectrpc.com/connect"
)

// Sentinels of the answers that stand for an error whose text stays in
// the server's log.
var (
	// ErrInternal: the server failed; its log has the cause under the id.
	ErrInternal = errors.New("server: internal error")
	// ErrDataLoss: stored data failed its checks in every copy; the log
	// has which.
	ErrDataLoss = errors.New("server: stored data failed its checks in every copy")
)

// redactInterceptor answers Internal and DataLoss errors without their
// text, which may name internal object keys, buckets or metastore items
// (issue 31): the caller gets the code, a sentinel and an id; the server
// logs the full error under that id.
type redactInterceptor struct{ s *Server }

func (i redactInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		return res, i.s.redact(req.Spec().Procedure, err)
	}
}

func (i redactInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i redactInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return i.s.redact(conn.Spec().Procedure, next(ctx, conn))
	}
}

// redact is err, or for an Internal or DataLoss error its redacted
// answer, the full error logged.
func (s *Server) redact(procedure string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) && (strings.HasPrefix(ce.Message(), "protocol error") || strings.HasPrefix(ce.Message(), "corrupt")) {
		return err // Connect's answer to a broken envelope: the caller's bytes, not the server's
	}
	var sentinel error
	switch connect.CodeOf(err) {
	case connect.CodeInternal:
		sentinel = ErrInternal
	case connect.CodeDataLoss:
		sentinel = ErrDataLoss
	default:
		return err
	}
	var b [6]byte
	_, _ = io.ReadFull(s.cfg.Rand, b[:])
	id := hex.EncodeToString(b[:])
	s.log.Error("call failed", "procedure", procedure, "code", connect.CodeOf(err).String(), "log_id", id, "err", err)
	return connect.NewError(connect.CodeOf(err), fmt.Errorf("%w (log id %s: the server's log has the cause)", sentinel, id))
}
