package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/grpchealth"

	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/server"
)

// TestReview3PeerHealth (ADR 0076): a move's target passes only when its
// gRPC health check answers SERVING for the strand service; NOT_SERVING
// (a star that has not started or is halted), no answer and no address
// are ErrTargetDown.
func TestReview3PeerHealth(t *testing.T) {
	checker := grpchealth.NewStaticChecker(strandv1connect.StrandServiceName)
	mux := http.NewServeMux()
	mux.Handle(grpchealth.NewHandler(checker))
	ts := httptest.NewServer(mux)
	defer ts.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens there now
	up := server.PeerHealth(http.DefaultClient)
	ctx := context.Background()
	if err := up(ctx, "star-1", ts.URL); err != nil {
		t.Fatalf("a serving peer: %v", err)
	}
	checker.SetStatus(strandv1connect.StrandServiceName, grpchealth.StatusNotServing)
	for what, url := range map[string]string{"not serving": ts.URL, "no answer": down.URL, "no address": ""} {
		if err := up(ctx, "star-1", url); !errors.Is(err, server.ErrTargetDown) {
			t.Errorf("%s: %v, want ErrTargetDown", what, err)
		}
	}
}
