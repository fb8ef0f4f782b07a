package server

import (
	"errors"
	"testing"

	"connectrpc.com/grpchealth"

	"github.com/strandlog/strand/shared/star"
)

// TestHealthStatus: the gRPC health status of each star state.
func TestHealthStatus(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		h    star.Health
		want grpchealth.Status
	}{
		{"not started", star.Health{}, grpchealth.StatusNotServing},
		{"leading", star.Health{Started: true, Chains: []star.ChainHealth{{}, {}}}, grpchealth.StatusServing},
		{"deposed", star.Health{Started: true, Chains: []star.ChainHealth{{}, {Deposed: boom}}}, grpchealth.StatusNotServing},
		{"halted, recovering", star.Health{Started: true, Chains: []star.ChainHealth{{Halted: boom}}}, grpchealth.StatusNotServing},
		{"halted past halt-wait", star.Health{Started: true, Chains: []star.ChainHealth{{Halted: boom, Stuck: true}}}, grpchealth.StatusNotServing},
	} {
		if got := healthStatus(tc.h); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
