package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// Response writes are bounded (Limits.WriteTimeout). A Read or
// ReadSession whose client stops reading blocks in a write: on HTTP/1 on
// a full socket, on HTTP/2 on a stream window the client does not grant.
// Without a bound it is held forever with its goroutines, read-ahead
// buffers and the star's subscription. Every write of a response goes
// out in chunks of at most writeChunk bytes, each with a fresh write
// deadline, and so does every flush: a client that takes no chunk within
// the timeout gets its call ended (HTTP/1: the connection's write fails
// and it is closed; HTTP/2: the stream is reset), and the handler
// returns. A slow reader that takes a chunk within each timeout is not
// cut off.

// writeChunk is the most a write sends under one deadline: a reader is
// cut off when it takes less than this in Limits.WriteTimeout.
const writeChunk = 64 << 10

// notSentLowat is the most a response's connection holds unsent in its
// socket before a write blocks (setNotSentLowat): a blocked write wakes
// once the reader has taken a chunk or two, not a third of the socket's
// send buffer.
const notSentLowat = 2 * writeChunk

// connContext is NewHTTPServer's ConnContext: it lowers the connection's
// unsent bytes (notSentLowat) and keeps the connection for
// markAuthenticated (withConn).
func connContext(ctx context.Context, c net.Conn) context.Context {
	nc := c
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if lc, ok := nc.(*limitConn); ok {
		nc = lc.Conn
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		setNotSentLowat(tc, notSentLowat)
	}
	return withConn(ctx, c)
}

// boundWrites serves next with a response writer that sets a write
// deadline d ahead before each chunk it writes and each flush.
func boundWrites(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bw := &boundedWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		// Once the handler returns, the server still writes what is
		// buffered (and, on HTTP/1, the headers of a response that wrote
		// nothing): under a deadline too, renewed from now, never one an
		// earlier call on the same connection left behind.
		defer bw.arm()
		next.ServeHTTP(bw, r)
	})
}

// boundedWriter is a response writer whose writes and flushes each have
// a deadline.
type boundedWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *boundedWriter) arm() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

// WriteHeader sends the headers under a deadline (HTTP/2 writes them at
// once; HTTP/1 buffers them with the body).
func (w *boundedWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

// Write writes p in chunks of at most writeChunk, each under a fresh
// deadline.
func (w *boundedWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), writeChunk)
		w.arm()
		k, err := w.ResponseWriter.Write(p[:c])
		n += k
		if err != nil {
			return n, err
		}
		p = p[c:]
	}
	return n, nil
}

// Flush flushes under a deadline (Connect flushes after every message a
// stream sends).
func (w *boundedWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error (http.ResponseController).
func (w *boundedWriter) FlushError() error {
	w.arm()
	return w.rc.Flush()
}

// Unwrap is the writer underneath (http.ResponseController).
func (w *boundedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
