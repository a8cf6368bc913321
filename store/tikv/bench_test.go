package tikv_test

import (
	"fmt"
	"testing"

	tikvclient "github.com/tikv/client-go/v2/tikv"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// prewrite is a row transaction like a transaction's prewrite of row i:
// a lock check, a lock and a value.
func prewrite(i, ts int) *store.RowTxn {
	lock, data := store.Column{Family: "f", Qualifier: "lock"}, store.Column{Family: "f", Qualifier: "v"}
	return &store.RowTxn{Table: "t", Row: fmt.Appendf(nil, "r%06d", i), NoSync: true,
		Checks: []store.Check{{Column: lock, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{{Column: lock, Ts: uint64(ts), Value: []byte("primary")},
			{Column: data, Ts: uint64(ts), Value: []byte("value of 24 bytes.......")}}}
}

// BenchmarkApply compares one row transaction on the TiKV mock with the
// pebble store in memory, and reports the TiKV RPCs each takes.
func BenchmarkApply(b *testing.B) {
	b.Run("tikv-mock", func(b *testing.B) {
		cc := &countingClient{}
		s := openMock(b, mockOptions{hijack: func(c tikvclient.Client) tikvclient.Client { cc.Client = c; return cc }})
		cc.n.Store(0)
		b.ResetTimer()
		for i := range b.N {
			if res, err := s.Apply(bg, prewrite(i, 1)); err != nil || !res.Applied {
				b.Fatal(res, err)
			}
		}
		b.ReportMetric(float64(cc.n.Load())/float64(b.N), "rpcs/op")
	})
	b.Run("pebble-mem", func(b *testing.B) {
		s := storetest.OpenReference(b)
		for i := range b.N {
			if res, err := s.Apply(bg, prewrite(i, 1)); err != nil || !res.Applied {
				b.Fatal(res, err)
			}
		}
	})
}

// BenchmarkApplyAll compares ApplyAll of n row transactions; ns/op is per
// call, and rpcs/op counts TiKV RPCs per call.
func BenchmarkApplyAll(b *testing.B) {
	for _, n := range []int{16, 256} {
		batch := func(i int) []*store.RowTxn {
			txns := make([]*store.RowTxn, n)
			for j := range txns {
				txns[j] = prewrite(i*n+j, 1)
			}
			return txns
		}
		b.Run(fmt.Sprintf("tikv-mock/%d", n), func(b *testing.B) {
			cc := &countingClient{}
			s := openMock(b, mockOptions{hijack: func(c tikvclient.Client) tikvclient.Client { cc.Client = c; return cc }})
			cc.n.Store(0)
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.ApplyAll(bg, batch(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cc.n.Load())/float64(b.N), "rpcs/op")
		})
		b.Run(fmt.Sprintf("pebble-mem/%d", n), func(b *testing.B) {
			s := storetest.OpenReference(b)
			for i := range b.N {
				if _, err := s.ApplyAll(bg, batch(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
