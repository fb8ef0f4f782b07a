package hostile

import (
	"context"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
)

// TestAckBelongsToItsPrincipal (issue 31 finding 7, one principal can
// replace another's acknowledged batch): a token that sends
// another token's producer id and next batch seq gets its own batch
// written; the owner's real batch is then written too, not answered with
// the impostor's seqs. Each token's own retry is still deduplicated.
func TestAckBelongsToItsPrincipal(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := e.client(t, e.admin)
	stream := e.w.Streams[0].Name
	tokA, _, err := admin.CreateToken(ctx, client.TokenSpec{Ops: []string{"append", "read"}})
	if err != nil {
		t.Fatal(err)
	}
	tokB, _, err := admin.CreateToken(ctx, client.TokenSpec{Ops: []string{"append"}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := e.client(t, tokA), e.client(t, tokB)
	id := client.ProducerID{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1} // guessable
	send := func(c *client.Client, seq uint64, body string) client.Ack {
		ack, err := c.Append(ctx, stream, []client.Record{{Body: []byte(body)}}, client.AppendOptions{Producer: &id, BatchSeq: seq})
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return ack
	}
	send(a, 0, "a0")
	send(b, 1, "b-steals-a1")
	ackA1 := send(a, 1, "a1")
	if again := send(a, 1, "a1"); again != ackA1 {
		t.Errorf("A's retry of batch 1: %+v, want its ack %+v", again, ackA1)
	}
	res, err := a.Read(ctx, stream, client.FromSeq(0), client.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, r := range res.Records {
		bodies = append(bodies, string(r.Body))
	}
	want := []string{"a0", "b-steals-a1", "a1"}
	if len(bodies) != len(want) || bodies[0] != want[0] || bodies[1] != want[1] || bodies[2] != want[2] {
		t.Errorf("the stream holds %q, want %q (A's batch 1 written once, not answered with B's seqs)", bodies, want)
	}
}
