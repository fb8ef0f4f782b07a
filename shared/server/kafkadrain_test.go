package server_test

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/client"
)

// TestDrainRefusalNamesThisStar: what the Kafka front end relies on
// during a drain (shared/kafka, ADR 0071). Submit is refused before
// anything is admitted, unavailable with the Leader detail naming this
// star itself (so the front end tells the drain from another star's
// leadership and may hold the produce, nothing of it written); Read and
// CheckTail still answer (a consumer's fetch is served until the front
// end closes).
func TestDrainRefusalNamesThisStar(t *testing.T) {
	n := newNode(t, newMeta(t), "star-1", false, nil)
	ctx := context.Background()
	must(t, func() error {
		_, err := newClient(t, n, "").CreateStream(ctx, "dr", client.CreateOptions{})
		return err
	}())
	rec := &strandv1.AppendRequest{Stream: "dr", Records: []*strandv1.AppendRecord{{Body: []byte("a")}}}
	w, err := n.srv.Submit(ctx, rec)
	must(t, err)
	_, err = w(ctx)
	must(t, err)

	n.srv.BeginDrain()
	_, err = n.srv.Submit(ctx, rec)
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable {
		t.Fatalf("a submission during a drain: %v, want unavailable", err)
	}
	leader := ""
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if l, ok := v.(*strandv1.Leader); ok {
				leader = l.Star
			}
		}
	}
	if leader != "star-1" {
		t.Fatalf("a submission during a drain names leader %q, want this star, star-1", leader)
	}
	tail, err := n.srv.CheckTail(ctx, connect.NewRequest(&strandv1.CheckTailRequest{Stream: "dr"}))
	if err != nil || tail.Msg.NextSeqNum != 1 {
		t.Fatalf("CheckTail during a drain: %v %v, want the tail at 1 (the refused record not written)", tail, err)
	}
	rd, err := n.srv.Read(ctx, connect.NewRequest(&strandv1.ReadRequest{Stream: "dr", Start: &strandv1.ReadRequest_SeqNum{SeqNum: 0}, Bytes: 1 << 20}))
	if err != nil || len(rd.Msg.Records) != 1 || string(rd.Msg.Records[0].Body) != "a" {
		t.Fatalf("Read during a drain: %v %v, want the one record", rd, err)
	}
}
