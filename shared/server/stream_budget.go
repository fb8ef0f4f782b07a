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
	b      *budget
	tenant string        // whose share the messages take
	max    int64         // the message limit
	wait   time.Duration // how long a message waits for room

	hdr  [5]byte
	nhdr int   // prefix bytes read of the next message
	left int64 // bytes of the current message still to read

	mu   sync.Mutex
	held int64 // taken and not given back
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

// take takes n from the budget (capped by budget.fit), waiting up to wait.
func (s *streamBudget) take(n int64) error {
	s.mu.Lock()
	n = s.b.fit(n, s.held)
	s.mu.Unlock()
	deadline := time.Now().Add(s.wait)
	for {
		err := s.b.take(s.tenant, n)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	s.held += n
	s.mu.Unlock()
	return nil
}

// done gives back what the messages read so far took.
func (s *streamBudget) done() {
	s.mu.Lock()
	n := s.held
	s.held = 0
	s.mu.Unlock()
	s.b.put(s.tenant, n)
}

func (s *streamBudget) Close() error {
	s.done()
	return s.ReadCloser.Close()
}

type budgetKey struct{}

// held is a call's share of the decoding budget: a streamBudget, or a
// unary call's heldBody. take adds n to it (what decoding a message will
// allocate, decode_budget.go), or fails with ErrBusy; done gives it all
// back.
type held interface {
	take(n int64) error
	done()
}

// heldBody is a unary call's body's share, given back once (when the
// handler says the message is done with, or when the call ends).
type heldBody struct {
	mu     sync.Mutex
	b      *budget
	tenant string
	n      int64
}

func (h *heldBody) take(n int64) error {
	h.mu.Lock()
	n = h.b.fit(n, h.n)
	h.mu.Unlock()
	if err := h.b.take(h.tenant, n); err != nil {
		return err
	}
	h.mu.Lock()
	h.n += n
	h.mu.Unlock()
	return nil
}

func (h *heldBody) done() {
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
