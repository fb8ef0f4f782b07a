package server

import (
	"context"
	"encoding/binary"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// streamBudget charges an AppendSession's messages to the server's
// decoding budget: it reads the request body's envelopes (5 bytes: flags,
// then the message length, big-endian; Connect, gRPC and gRPC-Web alike)
// and, at each message's prefix, takes the message's length (a compressed
// one: the message limit, what it may inflate to) before a byte of it is
// read. The handler gives it back (done) once the message is submitted:
// its records are then the star pool's to bound. A message that finds
// the budget spent waits up to Limits.DecodeWait, then ends the session with
// ResourceExhausted (ErrBusy), so that sessions together never hold more
// than Limits.MaxDecodingBytes of messages being read and decoded.
type streamBudget struct {
	io.ReadCloser
	share       // the messages' (wait: how long a message waits for room)
	max   int64 // the message limit

	hdr  [5]byte
	nhdr int   // prefix bytes read of the next message
	left int64 // bytes of the current message still to read
}

func (s *streamBudget) Read(p []byte) (int, error) {
	if s.left == 0 && s.nhdr == 5 {
		s.nhdr = 0 // the message is read: the next prefix starts
	}
	if s.nhdr < 5 {
		// Read the prefix byte by byte as the caller asks for it.
		p = p[:min(len(p), 5-s.nhdr)]
		n, err := s.ReadCloser.Read(p)
		copy(s.hdr[s.nhdr:], p[:n])
		s.nhdr += n
		if s.nhdr == 5 {
			size := int64(binary.BigEndian.Uint32(s.hdr[1:]))
			s.left = size
			if s.hdr[0]&1 != 0 { // compressed: what it may inflate to
				size = s.max
			}
			if size <= s.max {
				if err := s.take(size); err != nil {
					// Withhold the prefix's last byte: the reader (io.ReadFull
					// of the prefix) then reports this error, not a short read.
					return n - 1, connect.NewError(connect.CodeResourceExhausted, err)
				}
			}
		}
		return n, err
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.ReadCloser.Read(p)
	s.left -= int64(n)
	return n, err
}

func (s *streamBudget) Close() error {
	s.done()
	return s.ReadCloser.Close()
}

type budgetKey struct{}

// held is a call's share of the decoding budget: a streamBudget, or a
// unary call's share. take adds n to it (what decoding a message will
// allocate, decode_budget.go), or fails with ErrBusy; done gives it all
// back.
type held interface {
	take(n int64) error
	done()
}

// share is a call's share of the decoding budget: a unary call's body
// (given back when the handler says the message is done with, or when the
// call ends), or an AppendSession's messages (streamBudget).
type share struct {
	b      *budget
	tenant string        // whose half it is taken from
	wait   time.Duration // how long a take waits for room (0: it tries once)

	mu sync.Mutex
	n  int64 // taken and not given back
}

// take takes n (capped by budget.fit) from the budget, waiting up to wait.
func (h *share) take(n int64) error {
	h.mu.Lock()
	n = h.b.fit(n, h.n)
	h.mu.Unlock()
	deadline := time.Now().Add(h.wait)
	for {
		err := h.b.take(h.tenant, n)
		if err == nil {
			break
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.mu.Lock()
	h.n += n
	h.mu.Unlock()
	return nil
}

// done gives back all it took.
func (h *share) done() {
	h.mu.Lock()
	n := h.n
	h.n = 0
	h.mu.Unlock()
	h.b.put(h.tenant, n)
}

// messageDone gives the messages of the call read so far back to the
// decoding budget: an append's batch, once submitted, is the star pool's
// to bound (a no-op for calls without a share).
func messageDone(ctx context.Context) {
	if h, ok := ctx.Value(budgetKey{}).(held); ok {
		h.done()
	}
}
