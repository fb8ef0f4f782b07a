package server

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/strandlog/strand/shared/star"
)

// Coalesced ack writes. Connect flushes the response after every message a
// stream sends (http.Flusher), and on HTTP/2 a flush is a DATA frame and a
// write(2) on the connection: with one record per append, an append
// session's flushes were 9-11 % of the server's CPU
// (docs/performance/ingest.md, "Per-record calls"). An append session's
// send loop (sendAcks) holds a message's flush back while the next ack is
// already there to be written, so acks released together (one flight
// releases every batch it carries) go out in one write. It never holds a
// flush for an ack still to come: the last ack that is ready is flushed at
// once, and no ack waits for a timer.

// ackFlusher is an append session's response writer: Flush does nothing
// while the session's send loop holds it.
type ackFlusher struct {
	http.ResponseWriter
	f    http.Flusher
	hold atomic.Bool
}

// Flush flushes the response unless the send loop holds it.
func (w *ackFlusher) Flush() {
	if !w.hold.Load() {
		w.f.Flush()
	}
}

// Unwrap is the writer underneath (http.ResponseController).
func (w *ackFlusher) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// setHold holds (or releases) w's flushes; a nil w holds nothing.
func (w *ackFlusher) setHold(on bool) {
	if w != nil {
		w.hold.Store(on)
	}
}

type ackFlusherKey struct{}

// coalesceAcks serves an append session with an ackFlusher its send loop
// finds in the request's context (sessionFlusher).
func coalesceAcks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			next.ServeHTTP(w, r) // connect refuses a stream it cannot flush
			return
		}
		af := &ackFlusher{ResponseWriter: w, f: f}
		next.ServeHTTP(af, r.WithContext(context.WithValue(r.Context(), ackFlusherKey{}, af)))
	})
}

// sessionFlusher is the session's ackFlusher, nil when the handler is
// served without coalesceAcks.
func sessionFlusher(ctx context.Context) *ackFlusher {
	af, _ := ctx.Value(ackFlusherKey{}).(*ackFlusher)
	return af
}

// ackSource is a submitted batch's ack to come (*star.Pending).
type ackSource interface {
	Done() <-chan struct{}
	Result() (star.Ack, error)
}

// pending is one message of an append session, as the receive loop queues
// it for the send loop: the batch's ack to come, or the error that ends
// the session.
type pending struct {
	p   ackSource
	err error
}

// ready reports whether q can be sent without waiting.
func (q pending) ready() bool {
	if q.err != nil {
		return true
	}
	select {
	case <-q.p.Done():
		return true
	default:
		return false
	}
}

// sendAcks is an append session's send loop: it sends the ack of each
// queued batch, in queue order, and ends at the first error (returned as
// the session's) or when queue is closed (nil). When ctx ends, acks
// already queued and already there are still sent. Before each send it
// looks at the next queued message: when that one is ready too, the send's
// flush is held (hold(true)) and the next send carries both; otherwise the
// flush goes out at once (hold(false)). hold is false when it returns.
// The message looked at leaves the queue early, while a ready ack is
// written: for that moment a session holds one batch more than the
// queue's bound (Config.MaxPendingAppends), never a batch unacknowledged
// longer.
func sendAcks(ctx context.Context, queue <-chan pending, send func(star.Ack) error, hold func(bool)) error {
	defer hold(false)
	var next *pending
	closed := false
	for {
		var q pending
		switch {
		case next != nil:
			q, next = *next, nil
		case closed:
			return nil
		default:
			var ok bool
			select {
			case q, ok = <-queue:
			case <-ctx.Done():
				// Ended (EndSessions, or the client left): batches already
				// queued still get their acks, if they have them.
				select {
				case q, ok = <-queue:
				default:
					return ctx.Err()
				}
			}
			if !ok {
				return nil
			}
		}
		if q.err != nil {
			return toConnect(q.err)
		}
		ack, err := ackOrWait(ctx, q.p)
		if err != nil {
			return toConnect(err)
		}
		select {
		case n, ok := <-queue:
			if ok {
				next = &n
			} else {
				closed = true
			}
		default:
		}
		hold(next != nil && next.ready())
		if err := send(ack); err != nil {
			return err
		}
	}
}
