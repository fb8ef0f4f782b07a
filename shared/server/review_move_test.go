package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/objstore"
)

// Invariant (ADR 0062 with ADR 0065: exactly once across a move): a
// producer whose batch star-0 acknowledged before a move, and whose ack
// was lost, gets the original ack from star-1 when it resends the batch
// after the move, with more than 16 parts of other producers' batches
// between its batch and the move: star-1 recovers the
// producer from star-0's carried table. The resend writes nothing (the
// next append starts where the stream ended before it).
func TestReviewLostAckResentAfterMove(t *testing.T) {
	t.Run("refs", func(t *testing.T) { lostAckResentAfterMove(t) })
	t.Run("pass-index", func(t *testing.T) { lostAckResentAfterMove(t, objstore.NewMem("settled")) })
}

func lostAckResentAfterMove(t *testing.T, settled ...objstore.Bucket) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, b, c, st := moveOne(t, "logs/x", settled...)
	p := client.NewProducerID()
	opt := client.AppendOptions{Producer: &p, BatchSeq: 0}
	orig, err := c.Append(ctx, "logs/x", recs(3, "p"), opt)
	must(t, err)
	// Other producers' batches until more than 16 parts follow the
	// producer's batch (refs: counted; pass index: as many batches).
	ca := newClient(t, a, adminTok)
	for k := 0; ; k++ {
		q := client.NewProducerID()
		_, err := ca.Append(ctx, "logs/x", recs(1, fmt.Sprintf("q%d", k)), client.AppendOptions{Producer: &q})
		must(t, err)
		if k%20 != 19 {
			continue
		}
		refs, err := meta.QueryRefs(ctx, st.ID, orig.EndSeq, 1000)
		must(t, err)
		if len(refs) > 20 || len(settled) > 0 && k >= 400 {
			break
		}
		if k > 4000 {
			t.Fatalf("%d parts after the producer's batch after %d appends", len(refs), k)
		}
	}
	if _, _, err := c.MoveStream(ctx, "logs/x", "star-1"); err != nil {
		t.Fatal(err)
	}
	cb := newClient(t, b, adminTok)
	before, err := cb.Append(ctx, "logs/x", recs(1, "r"), client.AppendOptions{})
	must(t, err)
	again, err := cb.Append(ctx, "logs/x", recs(3, "p"), opt)
	must(t, err)
	if again.StartSeq != orig.StartSeq || again.EndSeq != orig.EndSeq {
		t.Fatalf("the resend after the move was acknowledged at %d-%d, the original at %d-%d: written twice", again.StartSeq, again.EndSeq, orig.StartSeq, orig.EndSeq)
	}
	after, err := cb.Append(ctx, "logs/x", recs(1, "s"), client.AppendOptions{})
	must(t, err)
	if after.StartSeq != before.EndSeq {
		t.Fatalf("the append after the resend starts at %d, want %d: the resend wrote records", after.StartSeq, before.EndSeq)
	}
}
