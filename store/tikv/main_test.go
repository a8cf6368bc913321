package tikv_test

import (
	"os"
	"testing"

	"github.com/trickle-dev/trickle/store/tikv"
)

// TestMain keeps the mock cluster's client logs out of test output.
func TestMain(m *testing.M) {
	tikv.RouteClientLogs(quiet.Handler())
	os.Exit(m.Run())
}
