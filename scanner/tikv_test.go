package scanner_test

import (
	"testing"

	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// The scanner finds work by scanning the notification group of whatever
// store it runs on; on TiKV (the mock cluster, split into regions inside
// the table) those scans cross regions.

var docSplits = map[string][][]byte{"docs": {[]byte("doc0010"), []byte("doc0025"), []byte("doc0040")}}

func TestScannerProcessesEveryNotificationOnceOnTiKV(t *testing.T) {
	c := tikvtest.New(t, &tikvtest.Options{SplitRows: docSplits})
	testEveryNotificationOnce(t, newFixtureOn(t, c.Open(t, nil), countRuns), 60)
}

func TestFailingObserverDoesNotStallOthersOnTiKV(t *testing.T) {
	c := tikvtest.New(t, nil)
	testFailingObserver(t, newFixtureOn(t, c.Open(t, nil), failOnDoc7))
}
