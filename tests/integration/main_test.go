package integration

import (
	"testing"

	"github.com/strandlog/strand/shared/emulator"
)

// TestMain stops the AWS emulator (moto), if a test started one.
func TestMain(m *testing.M) { emulator.Main(m) }
