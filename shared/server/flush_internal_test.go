package server

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/star"
)

// fakeAck is a batch's ack to come, released by closing done.
type fakeAck struct {
	seq  uint64
	done chan struct{}
	err  error
}

func newFake(seq uint64) *fakeAck { return &fakeAck{seq: seq, done: make(chan struct{})} }

func (f *fakeAck) Done() <-chan struct{} { return f.done }
func (f *fakeAck) Result() (star.Ack, error) {
	return star.Ack{FirstSeq: f.seq, LastSeq: f.seq}, f.err
}

func (f *fakeAck) isDone() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// sent is one send of sendAcks: the ack's seq and whether its flush was
// held.
type sent struct {
	seq  uint64
	held bool
}

// runSendAcks runs sendAcks on queue in the background; sends arrive on
// the returned channel, its result on the other.
func runSendAcks(ctx context.Context, queue <-chan pending) (<-chan sent, <-chan error, *atomic.Bool) {
	var hold atomic.Bool
	out, res := make(chan sent, 64), make(chan error, 1)
	go func() {
		res <- sendAcks(ctx, queue, func(a star.Ack) error {
			out <- sent{a.FirstSeq, hold.Load()}
			return nil
		}, hold.Store)
	}()
	return out, res, &hold
}

func nextSent(t *testing.T, out <-chan sent) sent {
	t.Helper()
	select {
	case s := <-out:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no ack sent within 5 s")
		return sent{}
	}
}

// TestSendAcksCoalescesReadyAcks: acks that are all there when the loop
// comes to them go out with their flushes held but the last's, which is
// flushed; the loop ends with nothing held.
func TestSendAcksCoalescesReadyAcks(t *testing.T) {
	q := make(chan pending, 3)
	for i := range 3 {
		f := newFake(uint64(i))
		close(f.done)
		q <- pending{p: f}
	}
	close(q)
	out, res, hold := runSendAcks(context.Background(), q)
	for i, want := range []bool{true, true, false} {
		if s := nextSent(t, out); s.seq != uint64(i) || s.held != want {
			t.Fatalf("send %d: %+v, want seq %d held %v", i, s, i, want)
		}
	}
	if err := <-res; err != nil || hold.Load() {
		t.Fatalf("ended with %v, hold %v; want nil and nothing held", err, hold.Load())
	}
}

// TestSendAcksHoldsNoAckBack: an ack that is there is flushed at once
// when the next queued batch's ack is still to come; it is not held for
// that one (nor for any timer).
func TestSendAcksHoldsNoAckBack(t *testing.T) {
	q := make(chan pending, 2)
	first, second := newFake(0), newFake(1)
	close(first.done)
	q <- pending{p: first}
	q <- pending{p: second}
	out, res, _ := runSendAcks(context.Background(), q)
	if s := nextSent(t, out); s.seq != 0 || s.held {
		t.Fatalf("first send %+v: want seq 0 flushed while the second ack is still to come", s)
	}
	close(second.done)
	if s := nextSent(t, out); s.seq != 1 || s.held {
		t.Fatalf("second send %+v, want seq 1 flushed", s)
	}
	close(q)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}

// TestSendAcksErrorAfterHeldAck: a ready ack followed by the error that
// ends the session: the ack is sent (held: the error's end of stream
// carries it out) and the loop returns the error with nothing held.
func TestSendAcksErrorAfterHeldAck(t *testing.T) {
	q := make(chan pending, 3)
	f := newFake(0)
	close(f.done)
	boom := errors.New("server: test: refused")
	q <- pending{p: f}
	q <- pending{err: boom}
	q <- pending{p: newFake(9)} // never sent: the session ended
	out, res, hold := runSendAcks(context.Background(), q)
	if s := nextSent(t, out); s.seq != 0 || !s.held {
		t.Fatalf("send %+v, want seq 0 held", s)
	}
	if err := <-res; !errors.Is(err, boom) || hold.Load() {
		t.Fatalf("ended with %v, hold %v; want %v and nothing held", err, hold.Load(), boom)
	}
	select {
	case s := <-out:
		t.Fatalf("sent %+v after the error", s)
	default:
	}
}

// TestSendAcksUnderConcurrency: batches queued by one goroutine while
// others release their acks in random order (a session's batches span
// streams): every ack goes out once, in queue order; a flush is held only
// while the next queued ack is already there; nothing is held at the end.
// Run with -race.
func TestSendAcksUnderConcurrency(t *testing.T) {
	const n = 2000
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (the acks' release order)", seed)
	rng := rand.New(rand.NewPCG(seed, 36))
	fakes := make([]*fakeAck, n)
	for i := range fakes {
		fakes[i] = newFake(uint64(i))
	}
	q := make(chan pending, 64)
	go func() {
		for _, f := range fakes {
			q <- pending{p: f}
		}
		close(q)
	}()
	order := rng.Perm(n)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				close(fakes[order[i]].done)
			}
		}()
	}
	var hold atomic.Bool
	next, held := 0, 0
	err := sendAcks(context.Background(), q, func(a star.Ack) error {
		if a.FirstSeq != uint64(next) {
			t.Fatalf("sent ack %d, want %d", a.FirstSeq, next)
		}
		if hold.Load() {
			held++
			if next+1 >= n || !fakes[next+1].isDone() {
				t.Fatalf("ack %d's flush held while the next ack was still to come", next)
			}
		}
		next++
		return nil
	}, hold.Store)
	wg.Wait()
	if err != nil || next != n || hold.Load() {
		t.Fatalf("ended with %v after %d of %d acks, hold %v", err, next, n, hold.Load())
	}
	t.Logf("%d acks, %d flushes held", n, held)
}

// TestSendAcksAfterTheEnd: when the session's context ends, acks already
// queued and there still go out; then the loop ends with ctx's error.
func TestSendAcksAfterTheEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q := make(chan pending, 2)
	f := newFake(0)
	close(f.done)
	q <- pending{p: f}
	var sends []uint64
	err := sendAcks(ctx, q, func(a star.Ack) error { sends = append(sends, a.FirstSeq); return nil }, func(bool) {})
	if len(sends) != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("sent %v, ended with %v; want [0] and context.Canceled", sends, err)
	}
}
