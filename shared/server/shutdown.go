package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/star"
)

// ErrShuttingDown: the server is draining for a shutdown. Calls that would
// start appending or tailing are refused with it, and the sessions still
// open end with it, as unavailable with the leader hint (this star: its
// successor takes over the same id), which clients retry.
var ErrShuttingDown = errors.New("server: draining for shutdown; reconnect")

// shutdown is the server's drain state (zero value: serving).
type shutdown struct {
	once     sync.Once
	ctx      context.Context // ends when the open sessions must end
	end      context.CancelFunc
	refusing atomic.Bool
}

func (d *shutdown) init() {
	d.once.Do(func() { d.ctx, d.end = context.WithCancel(context.Background()) })
}

// admitting are the calls refused once a drain begins: those that start
// appends or a tail. Unary reads and metadata calls are still served.
var admitting = map[string]bool{
	strandv1connect.StrandServiceAppendProcedure:        true,
	strandv1connect.StrandServiceAppendSessionProcedure: true,
	strandv1connect.StrandServiceReadSessionProcedure:   true,
}

// BeginDrain starts a graceful shutdown: from now on Append, AppendSession
// and ReadSession are refused with unavailable and the leader hint.
// Sessions already open continue (an append session's batches are refused
// by the star once it quiesces) until EndSessions.
func (s *Server) BeginDrain() {
	s.shutdown.init()
	s.shutdown.refusing.Store(true)
}

// EndSessions ends every open ReadSession and AppendSession with
// unavailable and the leader hint; it implies BeginDrain. Call it once the
// star has quiesced (star.Quiesce), so that an append session has received
// the ack of every batch the star admitted for it.
func (s *Server) EndSessions() {
	s.BeginDrain()
	s.shutdown.end()
}

func (s *Server) drainErr() error {
	return s.notLeader(s.cfg.Star.ID(), fmt.Errorf("star %s: %w", s.cfg.Star.ID(), ErrShuttingDown))
}

// shutdownInterceptor refuses admitting calls during a drain, and runs each
// streaming call under a context that EndSessions ends: a session ended so,
// or by a batch the quiescing star refused, reports unavailable with the
// leader hint, never a clean end or a cancellation, so its client
// reconnects.
type shutdownInterceptor struct{ s *Server }

func (i shutdownInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if i.s.shutdown.refusing.Load() && admitting[req.Spec().Procedure] {
			return nil, i.s.drainErr()
		}
		return next(ctx, req)
	}
}

func (i shutdownInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i shutdownInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		d := &i.s.shutdown
		d.init()
		if d.refusing.Load() && admitting[conn.Spec().Procedure] {
			return i.s.drainErr()
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(d.ctx, cancel)
		defer stop()
		err := next(ctx, conn)
		ended := d.ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || connect.CodeOf(err) == connect.CodeCanceled)
		// An append refused by the quiescing star (unavailable) says so too,
		// with the leader hint.
		refused := d.refusing.Load() && err != nil && connect.CodeOf(err) == connect.CodeUnavailable
		if ended || refused {
			return i.s.drainErr()
		}
		return err
	}
}

// ackOrWait is p's result if it has one, even when ctx has ended (a session
// ended after the star quiesced still sends the acks it has), else p.Wait.
func ackOrWait(ctx context.Context, p ackSource) (star.Ack, error) {
	select {
	case <-p.Done():
		return p.Result()
	default:
	}
	select {
	case <-p.Done():
		return p.Result()
	case <-ctx.Done():
		return star.Ack{}, ctx.Err()
	}
}
