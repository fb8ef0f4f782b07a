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

	// sniff, when set, reads the stream a message names first from its
	// first bytes as sent (compressed or not; complete: all of them) and
	// authorizes it (sniff.go); ahead are those bytes, read ahead and not
	// yet given to the caller; first is the stream the current message
	// named first, when sniffed.
	sniff   func(msg []byte, compressed, complete bool) (name string, ok bool, err error)
	ahead   []byte
	first   string
	sniffed bool
}

func (s *streamBudget) Read(p []byte) (int, error) {
	if s.left == 0 && len(s.ahead) == 0 && s.nhdr == 5 {
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
			if err := s.sniffMessage(); err != nil {
				return n - 1, err // the prefix's last byte withheld, as above
			}
		}
		return n, err
	}
	if len(s.ahead) > 0 {
		n := copy(p, s.ahead)
		s.ahead = s.ahead[n:]
		return n, nil
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.ReadCloser.Read(p)
	s.left -= int64(n)
	return n, err
}

// sniffMessage reads ahead the first bytes of the message whose prefix
// was just read, when it may pass sniffPrefix, and authorizes the stream
// it names first (sniff.go) before the rest is read.
func (s *streamBudget) sniffMessage() error {
	s.first, s.sniffed = "", false
	compressed := s.hdr[0]&1 != 0
	if s.sniff == nil || !compressed && s.left <= sniffPrefix || s.left > s.max {
		return nil
	}
	buf := make([]byte, min(s.left, sniffPrefix+1))
	m, err := io.ReadFull(s.ReadCloser, buf)
	s.left -= int64(m)
	s.ahead = buf[:m]
	if err != nil {
		return err
	}
	name, ok, err := s.sniff(s.ahead, compressed, s.left == 0)
	s.first, s.sniffed = name, ok
	return err
}

// sniffedStream is the stream the message being read named first, when
// it was read before the message.
func (s *streamBudget) sniffedStream() (string, bool) { return s.first, s.sniffed }

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
