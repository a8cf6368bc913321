package webindex_test

import (
	"testing"

	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// TestIncrementalEqualsBatchOnTiKV is TestIncrementalEqualsBatch on the
// TiKV mock (one region; the engine's own tests cover transactions across
// regions). The mock's in-memory engine runs some twenty times slower
// under the race detector, so a race build checks a smaller corpus.
func TestIncrementalEqualsBatchOnTiKV(t *testing.T) {
	pages := 160
	if raceEnabled || testing.Short() {
		pages = 40
	}
	c := tikvtest.New(t, nil)
	runIncremental(t, newEnvOn(t, c.Open(t, nil)), pages)
}
