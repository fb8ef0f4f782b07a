package star

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/format"
	"github.com/strandlog/strand/shared/metastore"
)

// TestMatchSeqMissReportsTheDurableTail: a producer's batch (match 0) is
// sequenced but its flight is not yet durable; the producer times out and
// retries with match 0. The miss must not answer "tail 1" (the batch looks
// written) while the batch is only sequenced: the answer waits, and is
// either the durable tail once the batch is acknowledged, or the failure
// that also took the batch (here Close). Regression test for issue 13
// finding 4: the retry was told tail 1 at once, and the batch was then lost
// at Close.
func TestMatchSeqMissReportsTheDurableTail(t *testing.T) {
	for _, tc := range []string{"acked", "closed"} {
		t.Run(tc, func(t *testing.T) {
			h, g, id := gatedStream(t)
			zero := uint64(0)
			one := recs(1, func(int) []byte { return []byte("once") })
			first, err := h.star.Submit(context.Background(), id, one, AppendOptions{MatchSeq: &zero})
			if err != nil {
				t.Fatal(err)
			}
			type res struct {
				p   *Pending
				err error
			}
			retry := make(chan res, 1)
			go func() {
				p, err := h.star.Submit(context.Background(), id, one, AppendOptions{MatchSeq: &zero})
				retry <- res{p, err}
			}()
			select {
			case r := <-retry:
				var mm *SeqMismatchError
				if errors.As(r.err, &mm) && mm.Tail > 0 {
					t.Fatalf("the retry was told tail %d while seq 0 is only sequenced", mm.Tail)
				}
				t.Fatalf("the retry was answered before the first batch resolved: %v", r.err)
			case <-time.After(50 * time.Millisecond):
			}
			if tc == "acked" {
				close(g.open)
				if _, err := first.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				r := <-retry
				var mm *SeqMismatchError
				if !errors.As(r.err, &mm) || mm.Tail != 1 {
					t.Fatalf("retry after the first batch was acked: %v, want a mismatch at the durable tail 1", r.err)
				}
				return
			}
			h.star.Close()
			if _, err := first.Wait(context.Background()); !errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("first batch at Close: %v", err)
			}
			r := <-retry
			var mm *SeqMismatchError
			if errors.As(r.err, &mm) || !errors.Is(r.err, ErrClosed) {
				t.Fatalf("retry when the first batch's outcome became unknown: %v, want ErrClosed and no tail", r.err)
			}
		})
	}
}

// TestMatchSeqMissWhileOthersAppend: the held answer waits only for the
// batches sequenced before the miss, not for a stream that never idles.
func TestMatchSeqMissWhileOthersAppend(t *testing.T) {
	h := newHarness(t, metastore.Standard, 1, 1)
	h.start()
	id := h.open(metastore.Standard, 1)[0]
	ctx := context.Background()
	if _, err := h.star.Append(ctx, id, []format.Record{{Body: []byte("first")}}, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := h.star.Submit(ctx, id, []format.Record{{Body: []byte("busy")}}, AppendOptions{}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	stale := uint64(0)
	for i := 0; i < 20; i++ {
		_, err := h.star.Append(ctx, id, []format.Record{{Body: []byte("x")}}, AppendOptions{MatchSeq: &stale})
		var mm *SeqMismatchError
		if !errors.As(err, &mm) {
			close(stop)
			<-done
			t.Fatalf("append with a stale match_seq_num: %v", err)
		}
		tail, _, _ := h.star.Tail(id)
		if mm.Tail > tail {
			t.Fatalf("mismatch reported tail %d beyond the acknowledged tail %d", mm.Tail, tail)
		}
	}
	close(stop)
	<-done
}
