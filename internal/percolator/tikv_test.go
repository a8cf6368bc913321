package percolator

import (
	"testing"

	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// The protocol rests on nothing but the store's row transactions, so its
// tests run on TiKV (client-go's in-process mock cluster) as on pebble: on
// one region, and on many, where a transaction's rows and a scan's range
// span region boundaries.

// tikvEnv returns a function making envs on a fresh mock TiKV cluster,
// split into regions at the given rows of the given tables if any.
func tikvEnv(splits map[string][][]byte) func(testing.TB) *env {
	return func(t testing.TB) *env {
		c := tikvtest.New(t, &tikvtest.Options{SplitRows: splits})
		return newEnvOn(t, c.Open(t, nil))
	}
}

// protocolSplits cut the tables and rows the protocol scenarios use.
var protocolSplits = map[string][][]byte{
	"bank": {[]byte("b"), []byte("c")}, "docs": {[]byte("b"), []byte("c"), []byte("x"), []byte("y")},
	"t": {[]byte("s")}, "kv": {[]byte("s")}, "acct": {[]byte("bob")}, "oncall": {[]byte("y")},
}

func TestProtocolOnTiKV(t *testing.T) {
	t.Run("one-region", func(t *testing.T) { runProtocol(t, tikvEnv(nil)) })
	t.Run("regions", func(t *testing.T) { runProtocol(t, tikvEnv(protocolSplits)) })
}

// bankSplits put every 100 accounts in regions of their own.
func bankSplits() map[string][][]byte {
	var rows [][]byte
	for i := 0; i < 1000; i += 100 {
		rows = append(rows, account(i))
	}
	return map[string][][]byte{"bank": rows}
}

// TestBankOnTiKV is TestBank on TiKV, with fewer workers and transfers
// (every operation is a few RPCs to the mock) and more frequent crashes,
// so that every commit step still crashes.
func TestBankOnTiKV(t *testing.T) {
	run := bankRun{workers: 8, transfers: 12, crashOneIn: 12}
	if testing.Short() {
		run.transfers = 5
	}
	for _, c := range []struct {
		name   string
		splits map[string][][]byte
	}{{"one-region", nil}, {"regions", bankSplits()}} {
		t.Run(c.name, func(t *testing.T) {
			if c.splits != nil && raceEnabled {
				// Starved of CPU, the mock's client takes its one store for
				// unavailable and fails requests after long backoffs; the
				// protocol scenarios and the scanner tests still cross
				// regions in race builds.
				t.Skip("the bank across regions of the TiKV mock runs in builds without -race")
			}
			runBank(t, tikvEnv(c.splits)(t), run)
		})
	}
}

// BenchmarkFig8OnTiKV is BenchmarkFig8 on the TiKV mock (one region, in
// memory, in process), with PD's timestamps as the oracle and the TiKV
// RPCs each operation takes (PD's timestamp requests not included).
func BenchmarkFig8OnTiKV(b *testing.B) {
	c := tikvtest.New(b, nil)
	st := c.Open(b, nil)
	e := newEnvOn(b, st)
	e.or = st.Oracle()
	fig8(b, e, st, c.RPCs, 8)
}
