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
