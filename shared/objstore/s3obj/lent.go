package s3obj

import (
	"bytes"
	"errors"
	"sync"
)

// errReturned: the SDK or the HTTP transport read a put's body after
// PutIfAbsent returned.
var errReturned = errors.New("s3obj: put body read after the put returned")

// lentBody is a PutIfAbsent's body as the SDK reads it. objstore's
// contract lets a caller reuse body once PutIfAbsent returned (settle's
// object buffers, ADR 0072), but net/http may go on reading a request's
// body after RoundTrip returned (an answer that came before the body was
// sent: a 412 for a taken key, a cancelled context). end, called before
// PutIfAbsent returns, waits for a read in progress and makes every later
// one fail, so no byte of the caller's buffer is read (and sent) once it
// is the caller's again. It is an io.ReadSeeker with Len, as the SDK
// wants of a body it signs and sizes.
type lentBody struct {
	mu   sync.Mutex
	r    *bytes.Reader
	done bool
}

func lend(body []byte) *lentBody { return &lentBody{r: bytes.NewReader(body)} }

func (l *lentBody) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return 0, errReturned
	}
	return l.r.Read(p)
}

func (l *lentBody) Seek(off int64, whence int) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return 0, errReturned
	}
	return l.r.Seek(off, whence)
}

// Len is the bytes not yet read.
func (l *lentBody) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return 0
	}
	return l.r.Len()
}

// end gives the body back: no read after it reaches the buffer.
func (l *lentBody) end() {
	l.mu.Lock()
	l.done = true
	l.r = nil
	l.mu.Unlock()
}
