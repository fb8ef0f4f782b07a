package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/client"
)

// TestMoveAfterQuiesceNamesLeader: a move from a star that has quiesced
// for a shutdown is refused (review2's TestReview2MoveAfterQuiesce), now
// with the Leader detail every other unavailable answer carries: the
// metastore still names star-0, whose successor takes the same id over,
// and the answer is the drain's. Before, "star: closed" named no leader.
func TestMoveAfterQuiesceNamesLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, a, _, c, _ := moveOne(t, "logs/q")
	_, err := c.Append(ctx, "logs/q", recs(3, "x"), client.AppendOptions{})
	must(t, err)
	a.srv.BeginDrain()
	must(t, a.star.Quiesce(ctx))
	api := strandv1connect.NewStrandServiceClient(http.DefaultClient, a.ts.URL)
	_, err = api.MoveStream(ctx, connect.NewRequest(&strandv1.MoveStreamRequest{Stream: "logs/q", ToStar: "star-1"}))
	wantCode(t, err, connect.CodeUnavailable)
	if l, ok := client.LeaderOf(err); !ok || l.Star != "star-0" {
		t.Fatalf("a move refused by the quiesced star: %v; leader %+v (%v), want star-0", err, l, ok)
	}
}

// TestRefusalAfterTakeoverNamesLeader: star-0 led logs/t and stopped
// serving (quiesced), and the metastore names star-1 now (a takeover
// written since). An append to star-0 is answered unavailable with the
// Leader detail naming star-1 and its URL, so the client follows it and
// the append lands on star-1; star-0 then names star-1 in GetStream too,
// and Submit (the Kafka front end's path, which answers a Leader detail
// NOT_LEADER_FOR_PARTITION) names it as well. Before: "star: closed" with
// no leader, and the client retried star-0 until its deadline.
func TestRefusalAfterTakeoverNamesLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, a, b, c, st := moveOne(t, "logs/t")
	_, err := c.Append(ctx, "logs/t", recs(3, "x"), client.AppendOptions{})
	must(t, err)
	must(t, a.star.Quiesce(ctx))
	// While the metastore still names star-0 (and no drain runs): no
	// Leader detail, which the Kafka front end would take for the
	// drain's and hold the produce (ADR 0071).
	_, err = a.srv.Submit(ctx, &strandv1.AppendRequest{Stream: "logs/t", Records: []*strandv1.AppendRecord{{Body: []byte("z")}}})
	if l, ok := client.LeaderOf(err); connect.CodeOf(err) != connect.CodeUnavailable || ok {
		t.Fatalf("Submit to the quiesced star still named leader: %v; leader %+v, want unavailable without a Leader detail", err, l)
	}
	must(t, meta.MoveStream(ctx, "logs/t", st.ID, "star-0", "star-1"))

	// Submit, the Kafka front end's path, names star-1 first.
	_, err = a.srv.Submit(ctx, &strandv1.AppendRequest{Stream: "logs/t", Records: []*strandv1.AppendRecord{{Body: []byte("z")}}})
	if l, ok := client.LeaderOf(err); connect.CodeOf(err) != connect.CodeUnavailable || !ok || l.Star != "star-1" {
		t.Fatalf("Submit to the star that stopped serving: %v; leader %+v (%v), want unavailable naming star-1", err, l, ok)
	}
	api := strandv1connect.NewStrandServiceClient(http.DefaultClient, a.ts.URL)
	_, err = api.Append(ctx, connect.NewRequest(&strandv1.AppendRequest{Stream: "logs/t", Records: []*strandv1.AppendRecord{{Body: []byte("y")}}}))
	wantCode(t, err, connect.CodeUnavailable)
	if l, ok := client.LeaderOf(err); !ok || l.Star != "star-1" || l.URL != b.ts.URL {
		t.Fatalf("an append to the star that stopped serving: %v; leader %+v (%v), want star-1 at %s", err, l, ok, b.ts.URL)
	}
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	if _, err := c.Append(actx, "logs/t", recs(1, "y"), client.AppendOptions{}); err != nil {
		t.Fatalf("the client did not follow the leader to star-1: %v", err)
	}
	got, err := newClient(t, a, adminTok).GetStream(ctx, "logs/t")
	must(t, err)
	if got.Leader != "star-1" {
		t.Fatalf("star-0 answers GetStream with leader %q, want star-1", got.Leader)
	}
}
