package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// BenchmarkIngest measures Ingest of one import chunk shaped like a web
// index's postings (the bulk of a bulk load's cells): rows of search terms,
// each with columns named by 64-character cluster keys and values of a few
// bytes, passed in key order as an import passes them. An op is one chunk
// of 200k cells, into a table of its own.
func BenchmarkIngest(b *testing.B) {
	const terms, perTerm = 2000, 100
	var txns []*store.RowTxn
	for t := range terms {
		txn := &store.RowTxn{Row: fmt.Appendf(nil, "term%05d", t), NoSync: true}
		for c := range perTerm {
			sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d", t, c))
			txn.Mutations = append(txn.Mutations, store.Mutation{Column: col("posting", hex.EncodeToString(sum[:])), Ts: 7, Value: []byte{1, byte(c)}})
		}
		slices.SortFunc(txn.Mutations, func(a, b store.Mutation) int { return strings.Compare(a.Column.Qualifier, b.Column.Qualifier) })
		txns = append(txns, txn)
	}
	db, err := store.Open(b.TempDir(), &store.Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.ReportAllocs()
	reportCPU(b)
	i := 0
	for b.Loop() {
		// A table of its own each time, so that no ingested file
		// overlaps another and nothing is compacted.
		i++
		table := fmt.Sprintf("terms%06d", i)
		for _, txn := range txns {
			txn.Table = table
		}
		if err := db.Ingest(ctx, txns); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*terms*perTerm), "ns/cell")
}
