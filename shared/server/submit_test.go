package server_test

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/server"
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

// TestSubmitKeepsTheTenantsRate: an append submitted by an in-process
// front end (the Kafka one) takes from its tenant's append byte rate as
// Append does (merge fix: kafka33's Submit and quota31's quota were built
// apart, and Kafka produces bypassed the quota; this failed before).
func TestSubmitKeepsTheTenantsRate(t *testing.T) {
	n := newNode(t, newMeta(t), "star-1", false, nil)
	ctx := context.Background()
	must(t, func() error {
		_, err := newClient(t, n, "").CreateStream(ctx, "q", client.CreateOptions{})
		return err
	}())
	g := auth.Grant{Ops: []auth.Op{auth.Append}, Tenant: "t1", AppendBytesPerSec: 1} // burst: one batch's bytes
	gctx := auth.WithGrant(ctx, g)
	big := &strandv1.AppendRequest{Stream: "q", Records: []*strandv1.AppendRecord{{Body: make([]byte, 600<<10)}}}
	w, err := n.srv.Submit(gctx, big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := n.srv.Submit(gctx, big); !errors.Is(err, server.ErrRateQuota) {
		t.Fatalf("a second 600 KiB submission past a 1 B/s rate: %v, want the rate quota", err)
	}
}
