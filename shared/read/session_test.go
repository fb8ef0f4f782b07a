package read

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/star"
)

// wakingIndex is a stream idle at tail whose watch channel the test closes
// at will (what other streams' releases did to a per-loglet watch).
type wakingIndex struct {
	tail uint64
	mu   sync.Mutex
	ch   chan struct{}
}

func (w *wakingIndex) Tail(format.StreamID) (uint64, int64, error) { return w.tail, 0, nil }
func (w *wakingIndex) ReadIndex(format.StreamID, uint64, int, int) ([]star.SeqRecord, uint64, error) {
	return nil, w.tail, nil
}
func (w *wakingIndex) WatchStream(format.StreamID) (uint64, <-chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.tail, w.ch, nil
}
func (w *wakingIndex) Watch(id format.StreamID) (uint64, <-chan struct{}, error) {
	return w.WatchStream(id)
}
func (w *wakingIndex) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// TestHeartbeatsDueWhateverWakesTheSession is issue 19's finding 3: a
// session woken more often than its heartbeat interval (every 50 ms, at a
// 100 ms interval) still sends a heartbeat each interval since its last
// message, never more often. Virtual time (synctest): no wall clock.
func TestHeartbeatsDueWhateverWakesTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := &wakingIndex{tail: 10}
		r := &Reader{Star: idx, Meta: metastore.NewMem()}
		st := metastore.Stream{Name: "idle", ID: format.StreamID{9}.String(), Class: metastore.Express}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for range 41 { // 2.05 s: off the heartbeat grid
				time.Sleep(50 * time.Millisecond)
				idx.wake()
			}
			cancel()
		}()
		var beats []time.Time
		start := time.Now()
		err := r.Session(ctx, st, Start{Seq: 10}, SessionOptions{Heartbeat: 100 * time.Millisecond}, func(b Batch) error {
			if !b.Heartbeat || len(b.Records) != 0 || b.Tail != 10 {
				t.Errorf("unexpected batch %+v", b)
			}
			beats = append(beats, time.Now())
			return nil
		})
		if err != context.Canceled {
			t.Fatalf("session ended with %v", err)
		}
		if len(beats) != 20 {
			t.Fatalf("%d heartbeats in 2.05 s at a 100 ms interval, woken every 50 ms: want 20", len(beats))
		}
		prev := start
		for i, b := range beats {
			if gap := b.Sub(prev); gap < 100*time.Millisecond {
				t.Fatalf("heartbeat %d %v after the previous message, under the interval", i, gap)
			}
			prev = b
		}
	})
}

// countingWatch counts the session's watches of one stream: one per time
// the session wakes and looks again.
type countingWatch struct {
	*star.Star
	id      format.StreamID
	n       atomic.Int64
	started chan struct{}
	once    sync.Once
}

func (c *countingWatch) WatchStream(id format.StreamID) (uint64, <-chan struct{}, error) {
	c.note(id)
	return c.Star.WatchStream(id)
}

func (c *countingWatch) Watch(id format.StreamID) (uint64, <-chan struct{}, error) {
	c.note(id)
	return c.Star.Watch(id)
}

func (c *countingWatch) note(id format.StreamID) {
	if id == c.id {
		c.n.Add(1)
		c.once.Do(func() { close(c.started) })
	}
}

// TestIdleSessionIgnoresOtherStreams: a session tailing an idle stream is
// not woken by appends to another stream of the same class (the same
// loglet); an append to its own stream still wakes it.
func TestIdleSessionIgnoresOtherStreams(t *testing.T) {
	e := newEnv(t)
	other := format.StreamID{7, 7}
	if err := e.star.Open(star.StreamInfo{ID: other, Class: metastore.Express}); err != nil {
		t.Fatal(err)
	}
	cw := &countingWatch{Star: e.star, id: e.id, started: make(chan struct{})}
	e.r.Star = cw
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Batch, 10)
	done := make(chan error, 1)
	go func() {
		done <- e.r.Session(ctx, e.st, Start{}, SessionOptions{Heartbeat: time.Hour}, func(b Batch) error {
			got <- b
			return nil
		})
	}()
	<-cw.started
	for i := range 50 {
		if _, err := e.star.Append(context.Background(), other, []format.Record{{TimestampMs: int64(i), Body: []byte("x")}}, star.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.appendN(1, 1)
	select {
	case b := <-got:
		check(t, b.Records, 0, 1)
	case err := <-done:
		t.Fatalf("session ended: %v", err)
	}
	if n := cw.n.Load(); n > 3 {
		t.Fatalf("the idle session looked again %d times while another stream took 50 appends", n)
	}
}
