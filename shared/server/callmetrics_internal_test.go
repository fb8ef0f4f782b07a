package server

import (
	"testing"

	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/metrics"
)

// TestCallMetricsAllocateNothing: after a procedure's first call, counting
// a successful call (an Append on the hot path) allocates nothing; every
// procedure of the service is known, the sessions as sessions.
func TestCallMetricsAllocateNothing(t *testing.T) {
	m := newCallMetrics(metrics.NewRegistry(), clock.OrReal(nil))
	for _, proc := range []string{strandv1connect.StrandServiceAppendProcedure, strandv1connect.StrandServiceReadProcedure,
		strandv1connect.StrandServiceCreateStreamProcedure, strandv1connect.StrandServiceReconfigureStreamProcedure} {
		if p := m.procs[proc]; p == nil || p.open != nil {
			t.Fatalf("%s: %+v, want a unary procedure", proc, p)
		}
	}
	for _, proc := range []string{strandv1connect.StrandServiceAppendSessionProcedure, strandv1connect.StrandServiceReadSessionProcedure} {
		if p := m.procs[proc]; p == nil || p.open == nil {
			t.Fatalf("%s: %+v, want a session", proc, p)
		}
	}
	p := m.procs[strandv1connect.StrandServiceAppendProcedure]
	m.done(p, nil, 0.001)
	if allocs := testing.AllocsPerRun(1000, func() { m.done(p, nil, 0.002) }); allocs != 0 {
		t.Fatalf("%v allocations per counted call", allocs)
	}
	if n := p.ok.Value(); n != 1002 {
		t.Fatalf("%d calls counted, want 1002", n)
	}
}
