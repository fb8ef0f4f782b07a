package star

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
)

// TestQuiesceAcksEverythingAdmittedThenCloses: Quiesce refuses new batches
// at once (ErrClosed, reported as unavailable), waits for the pooled
// batches and the flight held in the air to commit and be acknowledged,
// publishes the final released head (the notifier, at a 1 h interval,
// would not), and Close then fails nothing. Without Quiesce, Close fails
// every batch not yet acknowledged with ErrClosed.
func TestQuiesceAcksEverythingAdmittedThenCloses(t *testing.T) {
	g := &gate{Bucket: objstore.NewMem("gated"), open: make(chan struct{})}
	w := &flakyWaker{}
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, o *Options) {
		c.Standard.Buckets = []objstore.Bucket{g}
		c.Standard.ParallelUploads = 1
		c.ReleaseEventInterval = time.Hour
		o.Waker = w
	})
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	ctx := context.Background()
	one := []format.Record{{Body: []byte("x")}}
	var pend []*Pending
	for range 20 {
		p, err := h.star.Submit(ctx, id, one, AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	done := make(chan error, 1)
	go func() { done <- h.star.Quiesce(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := h.star.Submit(ctx, id, one, AppendOptions{})
		if errors.Is(err, ErrClosed) {
			break
		}
		if err != nil {
			t.Fatalf("submit while quiescing: %v, want ErrClosed", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("still admitting 5 s after Quiesce began")
		}
		time.Sleep(time.Millisecond) // admitted before the drain began: it must be acked too
	}
	select {
	case err := <-done:
		t.Fatalf("Quiesce returned %v with a flight held in the air", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.star.Close()
	for i, p := range pend {
		select {
		case <-p.Done():
		default:
			t.Fatalf("batch %d not finished after Quiesce", i)
		}
		if a, err := p.Result(); err != nil || a.FirstSeq != uint64(i) {
			t.Fatalf("batch %d: %+v %v, want acknowledged at seq %d", i, a, err, i)
		}
	}
	c := metastore.ChainID{Star: h.star.ID(), Class: metastore.Standard}
	if got, _ := w.last(); got != h.star.Released(c) {
		t.Fatalf("last release event %s, want the final head %s", got, h.star.Released(c))
	}
}

// TestQuiesceBoundedByContext: a flight that cannot commit holds Quiesce
// only until its context ends, and the error says what is pending.
func TestQuiesceBoundedByContext(t *testing.T) {
	g := &gate{Bucket: objstore.NewMem("gated"), open: make(chan struct{})}
	h := newHarness(t, metastore.Standard, 1, 1, func(c *Config, _ *Options) { c.Standard.Buckets = []objstore.Bucket{g} })
	h.start()
	defer close(g.open)
	id := h.open(metastore.Standard, 1)[0]
	if _, err := h.star.Submit(context.Background(), id, []format.Record{{Body: []byte("x")}}, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.star.Quiesce(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Quiesce: %v, want the deadline", err)
	}
}
