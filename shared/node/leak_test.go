package node

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the node's tests leave no goroutine behind: Close
// ends everything Start began.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
