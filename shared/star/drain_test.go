package star

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// Drain refuses new appends at once, returns only once everything admitted
// for the stream is acknowledged and absorbed, and forgets the stream.
func TestDrainWaitsForTheAbsorb(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	ids := h.open(metastore.Standard, 2)
	id, other := ids[0], ids[1]
	ctx := context.Background()
	one := []format.Record{{Body: []byte("x")}}
	if _, err := h.star.Append(ctx, id, one, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.star.Drain(ctx, id) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Drain returned %v with an acknowledged batch not yet absorbed", err)
	default:
	}
	if _, err := h.star.Submit(ctx, id, one, AppendOptions{}); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("append while draining: %v, want ErrUnknownStream", err)
	}
	// Other streams of the loglet keep appending.
	if _, err := h.star.Append(ctx, other, one, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	ch := metastore.ChainID{Star: h.star.ID(), Class: metastore.Standard}
	h.star.Absorbed(ch, h.star.Released(ch))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return once the stream was absorbed")
	}
	if _, err := h.star.Submit(ctx, id, one, AppendOptions{}); !errors.Is(err, ErrUnknownStream) {
		t.Fatalf("append after drain: %v, want ErrUnknownStream", err)
	}
	if err := h.star.Drain(ctx, id); err != nil {
		t.Fatalf("draining a stream that is not open: %v", err)
	}
}

// A drain that runs out of time restores the stream: appends resume at the
// same tail.
func TestDrainTimeoutRestoresTheStream(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	ctx := context.Background()
	one := []format.Record{{Body: []byte("x")}}
	if _, err := h.star.Append(ctx, id, one, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	err := h.star.Drain(dctx, id)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain: %v, want the deadline", err)
	}
	a, err := h.star.Append(ctx, id, one, AppendOptions{})
	if err != nil || a.FirstSeq != 1 {
		t.Fatalf("append after a timed-out drain: %+v %v, want first seq 1", a, err)
	}
}

// Drain racing appends: every append either is refused or was admitted
// before the drain took the stream, and when Drain returns nothing of the
// stream is left in the pool, in the air or in the unabsorbed backlog.
func TestDrainRacingAppends(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	ids := h.open(metastore.Standard, 2)
	id, other := ids[0], ids[1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := metastore.ChainID{Star: h.star.ID(), Class: metastore.Standard}
	absorbed := make(chan struct{})
	go func() { // the absorb, catching up every millisecond
		defer close(absorbed)
		for ctx.Err() == nil {
			h.star.Absorbed(ch, h.star.Released(ch))
			time.Sleep(time.Millisecond)
		}
	}()
	type result struct {
		other          bool
		acked, refused int
	}
	results := make(chan result, 4)
	for p := range 4 {
		go func() {
			r := result{other: p == 3}
			target := id
			if r.other {
				target = other
			}
			for ctx.Err() == nil {
				_, err := h.star.Append(ctx, target, []format.Record{{Body: []byte("r")}}, AppendOptions{})
				switch {
				case err == nil:
					r.acked++
				case errors.Is(err, ErrUnknownStream):
					r.refused++
				case ctx.Err() != nil:
				default:
					t.Errorf("append: %v", err)
				}
			}
			results <- r
		}()
	}
	time.Sleep(30 * time.Millisecond)
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	if err := h.star.Drain(dctx, id); err != nil {
		t.Fatal(err)
	}
	l := h.star.loglets[metastore.Standard]
	l.mu.Lock()
	left := 0
	l.pool.each(func(b *batch) {
		if b.st.id == id {
			left++
		}
	})
	for _, f := range l.inflight {
		for _, b := range f.batches {
			if b.st.id == id {
				left++
			}
		}
	}
	for _, f := range l.released {
		for _, b := range f.batches {
			if b.st.id == id {
				left++
			}
		}
	}
	l.mu.Unlock()
	if left > 0 {
		t.Fatalf("%d batches of the drained stream still pooled, in the air or unabsorbed", left)
	}
	time.Sleep(20 * time.Millisecond) // appends keep being refused; the other stream keeps going
	cancel()
	<-absorbed
	var drainedAcked, drainedRefused int
	for range 4 {
		r := <-results
		if r.other {
			if r.refused > 0 || r.acked == 0 {
				t.Fatalf("the other stream: %+v, want appends acknowledged and none refused", r)
			}
			continue
		}
		drainedAcked += r.acked
		drainedRefused += r.refused
	}
	if drainedAcked == 0 || drainedRefused == 0 {
		t.Fatalf("drained stream: %d appends acknowledged before, %d refused after: want both", drainedAcked, drainedRefused)
	}
}
