package server_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/client"
)

// TestSubmitPipelinesInOrder: appends submitted without waiting are
// acknowledged in submission order with contiguous seqs; a bad append is
// refused at submission as Append refuses it; during a drain Submit is
// refused unavailable.
func TestSubmitPipelinesInOrder(t *testing.T) {
	n := newNode(t, newMeta(t), "star-1", false, nil)
	ctx := context.Background()
	must(t, func() error {
		_, err := newClient(t, n, "").CreateStream(ctx, "sub", client.CreateOptions{})
		return err
	}())
	var waits []func(context.Context) (*strandv1.AppendResponse, error)
	for i := range 20 {
		w, err := n.srv.Submit(ctx, &strandv1.AppendRequest{Stream: "sub", Records: []*strandv1.AppendRecord{{Body: []byte{byte(i)}}, {Body: []byte{byte(i)}}}})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	for i, w := range waits {
		a, err := w(ctx)
		if err != nil || a.StartSeqNum != uint64(2*i) || a.EndSeqNum != uint64(2*i+2) {
			t.Fatalf("submission %d: %+v %v, want seqs %d..%d", i, a, err, 2*i, 2*i+2)
		}
	}
	if _, err := n.srv.Submit(ctx, &strandv1.AppendRequest{Stream: "sub"}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("an empty append: %v, want invalid_argument", err)
	}
	n.srv.BeginDrain()
	if _, err := n.srv.Submit(ctx, &strandv1.AppendRequest{Stream: "sub", Records: []*strandv1.AppendRecord{{Body: []byte("x")}}}); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("a submission during a drain: %v, want unavailable", err)
	}
}
