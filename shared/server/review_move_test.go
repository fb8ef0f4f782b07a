package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/auth"
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

// A stream moved away, deleted and created again under the same name is
// a new stream (a new id): the star it left, which remembers the move of
// the old id, creates and serves it, its seqs start at 0, and a move of
// it again works (the remembered move and Stream.From are the old id's).
func TestReviewRecreatedAfterMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, _, b, c, old := moveOne(t, "logs/y")
	_, err := c.Append(ctx, "logs/y", recs(4, "old"), client.AppendOptions{})
	must(t, err)
	if _, _, err := c.MoveStream(ctx, "logs/y", "star-1"); err != nil {
		t.Fatal(err)
	}
	cb := newClient(t, b, adminTok)
	must(t, cb.DeleteStream(ctx, "logs/y"))
	st, err := c.CreateStream(ctx, "logs/y", client.CreateOptions{Class: "express"})
	must(t, err)
	if st.ID == old.ID {
		t.Fatalf("the recreated stream has the old id %s", st.ID)
	}
	got, err := meta.GetStream(ctx, "logs/y")
	must(t, err)
	if got.From != "" {
		t.Fatalf("the recreated stream carries the old one's From %q", got.From)
	}
	lead := map[string]*client.Client{"star-0": c, "star-1": cb}[got.Star]
	if lead == nil {
		t.Fatalf("recreated on %q", got.Star)
	}
	ack, err := lead.Append(ctx, "logs/y", recs(2, "new"), client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != 0 {
		t.Fatalf("the recreated stream's first append at %d, want 0", ack.StartSeq)
	}
	to := map[string]string{"star-0": "star-1", "star-1": "star-0"}[got.Star]
	if _, _, err := lead.MoveStream(ctx, "logs/y", to); err != nil {
		t.Fatalf("moving the recreated stream: %v", err)
	}
	ack, err = map[string]*client.Client{"star-0": c, "star-1": cb}[to].Append(ctx, "logs/y", recs(1, "moved"), client.AppendOptions{})
	must(t, err)
	if ack.StartSeq != 3 { // 2 records and the seal
		t.Fatalf("after the second move the append is at %d, want 3", ack.StartSeq)
	}
}

// Who may move (ADR 0065): an admin grant scoped to a prefix, the
// stream's own tenant's or another's, is refused before anything is read
// or written: the stream stays led by star-0, unsealed (an append there
// is acknowledged right after the seqs before).
func TestReviewTenantAdminsCannotMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// movePair's nodes run without authentication: these check tokens.
	meta := newMeta(t)
	std, exp := []objstore.Bucket{objstore.NewMem("std-0")}, []objstore.Bucket{objstore.NewMem("exp-0"), objstore.NewMem("exp-1"), objstore.NewMem("exp-2")}
	pa, pb := map[string]string{}, map[string]string{}
	a := newNodeOn(t, meta, "star-0", &auth.Checker{Meta: meta}, pa, nil, std, exp)
	b := newNodeOn(t, meta, "star-1", &auth.Checker{Meta: meta}, pb, nil, std, exp)
	pa["star-1"], pb["star-0"] = b.ts.URL, a.ts.URL
	c := newClient(t, a, adminTok)
	_, err := c.CreateStream(ctx, "logs/z", client.CreateOptions{Class: "express"})
	must(t, err)
	first, err := c.Append(ctx, "logs/z", recs(2, "x"), client.AppendOptions{})
	must(t, err)
	for i, prefix := range []string{"logs/", "other/", "logs/z"} {
		tk := tok(byte(100 + i))
		must(t, auth.Issue(ctx, meta, tk, prefix, []auth.Op{auth.Admin, auth.Append, auth.Read}))
		_, _, err := newClient(t, a, tk).MoveStream(ctx, "logs/z", "star-1")
		wantCode(t, err, connect.CodePermissionDenied)
	}
	got, err := meta.GetStream(ctx, "logs/z")
	must(t, err)
	if got.Star != "star-0" || got.From != "" {
		t.Fatalf("stream after refused moves: led by %q, from %q", got.Star, got.From)
	}
	next, err := c.Append(ctx, "logs/z", recs(1, "y"), client.AppendOptions{})
	must(t, err)
	if next.StartSeq != first.EndSeq {
		t.Fatalf("append after refused moves at %d, want %d (a seal took a seq?)", next.StartSeq, first.EndSeq)
	}
	// The same star and stream move for the operator's admin.
	if _, _, err := c.MoveStream(ctx, "logs/z", "star-1"); err != nil {
		t.Fatalf("the operator's move: %v", err)
	}
}
