package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/objstore"
)

// TestReview2TrimAfterMove (ADR 0065 against trim, attack): records
// star-0 wrote before a move, still in star-0's chain (refs) or its
// chain's window (pass index: nothing settles here), are read by star-1
// through the stream's From. A trim on star-1 after the move, below the
// move's seal and then above it, is honoured by both windows: a read from
// seq 0 starts at the trim point, and the records above it, old star's
// and new star's, are all there in order.
func TestReview2TrimAfterMove(t *testing.T) {
	t.Run("refs", func(t *testing.T) { trimAfterMove(t) })
	t.Run("pass-index", func(t *testing.T) { trimAfterMove(t, objstore.NewMem("settled")) })
}

func trimAfterMove(t *testing.T, settled ...objstore.Bucket) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, b, c, _ := moveOne(t, "logs/t", settled...)
	_, err := c.Append(ctx, "logs/t", recs(6, "old"), client.AppendOptions{}) // 0-5
	must(t, err)
	if _, _, err := c.MoveStream(ctx, "logs/t", "star-1"); err != nil { // the seal: 6
		t.Fatal(err)
	}
	cb := newClient(t, b, adminTok)
	_, err = cb.Append(ctx, "logs/t", recs(2, "new"), client.AppendOptions{}) // 7-8
	must(t, err)
	for _, trim := range []uint64{4, 8} {
		tr, err := cb.Trim(ctx, "logs/t", trim, client.TrimOptions{})
		must(t, err)
		if tr.TrimSeq != trim {
			t.Fatalf("trim at %d: trim point %d", trim, tr.TrimSeq)
		}
		for _, rc := range []*client.Client{cb, c} { // c: star-0, sent on to star-1
			res, err := rc.Read(ctx, "logs/t", client.FromSeq(0), client.Limits{Count: 100})
			must(t, err)
			var got []string
			for _, r := range res.Records {
				got = append(got, fmt.Sprintf("%d:%s", r.Seq, r.Body))
			}
			if len(res.Records) == 0 || res.Records[0].Seq != trim {
				t.Fatalf("after a trim at %d, a read from 0 returned %v; want it to start at %d", trim, got, trim)
			}
			for i, r := range res.Records {
				if r.Seq != trim+uint64(i) {
					t.Fatalf("after a trim at %d, a read from 0 returned %v: not contiguous", trim, got)
				}
			}
			if want := tr.Seq + 1; res.NextSeq != want {
				t.Fatalf("after a trim at %d, the tail is %d, want %d", trim, res.NextSeq, want)
			}
		}
	}
}

// TestReview2MoveDeletedStream (attack): MoveStream on a stream deleted
// on its leader, before and after a move, is refused NotFound and
// creates nothing.
func TestReview2MoveDeletedStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, _, b, c, _ := moveOne(t, "logs/d")
	_, err := c.Append(ctx, "logs/d", recs(2, "x"), client.AppendOptions{})
	must(t, err)
	must(t, c.DeleteStream(ctx, "logs/d"))
	_, _, err = c.MoveStream(ctx, "logs/d", "star-1")
	wantCode(t, err, connect.CodeNotFound)

	_, err = c.CreateStream(ctx, "logs/e", client.CreateOptions{Class: "express"})
	must(t, err)
	if _, _, err := c.MoveStream(ctx, "logs/e", "star-1"); err != nil {
		t.Fatal(err)
	}
	cb := newClient(t, b, adminTok)
	must(t, cb.DeleteStream(ctx, "logs/e"))
	for _, mc := range []*client.Client{c, cb} {
		_, _, err = mc.MoveStream(ctx, "logs/e", "star-0")
		wantCode(t, err, connect.CodeNotFound)
	}
	for _, name := range []string{"logs/d", "logs/e"} {
		if st, err := meta.GetStream(ctx, name); err == nil {
			t.Fatalf("%s after a refused move of the deleted stream: %+v", name, st)
		}
	}
}

// TestReview2MoveWhileDraining (attack): a move of a stream whose star
// has begun its drain (BeginDrain: appends refused, the star not yet
// quiesced). MoveStream is not among the calls the drain refuses, so the
// move runs: the stream ends led by star-1, which acknowledges the next
// append right after the seal, and star-0 acknowledges nothing more.
func TestReview2MoveWhileDraining(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, b, c, _ := moveOne(t, "logs/w")
	_, err := c.Append(ctx, "logs/w", recs(3, "x"), client.AppendOptions{}) // 0-2
	must(t, err)
	a.srv.BeginDrain()
	_, _, err = c.MoveStream(ctx, "logs/w", "star-1") // the seal: 3
	if err != nil {
		t.Fatalf("a move from a draining star: %v", err)
	}
	st, err := meta.GetStream(ctx, "logs/w")
	must(t, err)
	if st.Star != "star-1" {
		t.Fatalf("after the move the stream is led by %q", st.Star)
	}
	ack, err := newClient(t, b, adminTok).Append(ctx, "logs/w", recs(1, "y"), client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != 4 {
		t.Fatalf("the append after the move is at %d, want 4 (after the seal)", ack.StartSeq)
	}
}

// TestReview2MoveAfterQuiesce (attack): once the draining star has
// quiesced, a move of its stream is refused, unavailable (its successor
// will serve it), and nothing is written: the stream is still led by
// star-0, and unsealed (no seal record after its appends).
func TestReview2MoveAfterQuiesce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, _, c, _ := moveOne(t, "logs/q")
	_, err := c.Append(ctx, "logs/q", recs(3, "x"), client.AppendOptions{})
	must(t, err)
	a.srv.BeginDrain()
	must(t, a.star.Quiesce(ctx))
	mctx, mcancel := context.WithTimeout(ctx, time.Second) // the client retries unavailable
	defer mcancel()
	_, _, err = c.MoveStream(mctx, "logs/q", "star-1")
	t.Logf("the move from the quiesced star: %v", err)
	if code := connect.CodeOf(err); code != connect.CodeUnavailable && code != connect.CodeDeadlineExceeded {
		t.Fatalf("a move from a quiesced star: %v, want unavailable", err)
	}
	st, err := meta.GetStream(ctx, "logs/q")
	must(t, err)
	if st.Star != "star-0" {
		t.Fatalf("after a refused move the stream is led by %q", st.Star)
	}
	// Reads are served during a drain: no seal record after the three.
	res, err := c.Read(ctx, "logs/q", client.FromSeq(0), client.Limits{Count: 10})
	must(t, err)
	if len(res.Records) != 3 || res.NextSeq != 3 {
		t.Fatalf("after a refused move: %d records, tail %d; want 3 and 3 (no seal)", len(res.Records), res.NextSeq)
	}
}
