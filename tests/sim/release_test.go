package sim

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strandlog/strand/shared/star"
)

// TestReleaseVerdict: the release checker (invariant 4) refuses a batch
// below the released head that is not acked, and one at or above it that
// is; a batch told its outcome is unknown (a halted epoch) is allowed in
// a released slot, since recovery may commit its flight in the next epoch.
// It failed before for that case (the checker called the batch "not
// acked"; seen once at seed 62, step 61, of an earlier takeover-after-merge
// workload: "outcome unknown: epoch 5 halted", committed in epoch 6's slot
// 0).
func TestReleaseVerdict(t *testing.T) {
	halted := fmt.Errorf("%w: %w: epoch 5 halted for 1s: store down", star.ErrOutcomeUnknown, star.ErrHalted)
	for _, tc := range []struct {
		name           string
		slot, released uint64
		done           bool
		err            error
		ok             bool
	}{
		{"below, acked", 0, 1, true, nil, true},
		{"below, pending", 0, 1, false, nil, false},
		{"below, refused", 0, 1, true, star.ErrNotLeader, false},
		{"below, halted", 0, 1, true, star.ErrHalted, false},
		{"below, outcome unknown", 0, 1, true, halted, true},
		{"at, acked", 1, 1, true, nil, false},
		{"at, pending", 1, 1, false, nil, true},
		{"above, outcome unknown", 2, 1, true, halted, true},
	} {
		err := releaseVerdict(tc.slot, tc.released, tc.done, tc.err)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if errors.Is(star.ErrHalted, star.ErrOutcomeUnknown) {
		t.Fatal("ErrHalted alone reads as outcome unknown: the 'below, halted' case tests nothing")
	}
}
