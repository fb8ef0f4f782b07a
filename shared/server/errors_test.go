package server

import (
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/star"
)

// TestOutcomeUnknownIsNotUnavailable: an append whose batch may be
// committed must not look like "not written, retry" (Unavailable, which
// generic retry policies retry blindly). Regression test for issue 13
// finding 3: it was Unavailable.
func TestOutcomeUnknownIsNotUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code connect.Code
	}{
		{fmt.Errorf("%w: %w", star.ErrClosed, star.ErrOutcomeUnknown), connect.CodeAborted},
		{star.ErrClosed, connect.CodeUnavailable},
		{star.ErrNotLeader, connect.CodeUnavailable},
		{fmt.Errorf("%w: epoch 3 halted for 30s: %w", star.ErrOutcomeUnknown, star.ErrHalted), connect.CodeAborted},
		{fmt.Errorf("%w: epoch 3 halted for more than 30s, nothing written", star.ErrHalted), connect.CodeUnavailable},
	} {
		got := toConnect(tc.err)
		if connect.CodeOf(got) != tc.code {
			t.Errorf("%v: code %v, want %v", tc.err, connect.CodeOf(got), tc.code)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("%v: the mapped error lost its cause: %v", tc.err, got)
		}
	}
}
