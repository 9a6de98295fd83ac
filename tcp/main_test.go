package tcp

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every channel
// a test creates is Closed, and Close waits for all of its goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
