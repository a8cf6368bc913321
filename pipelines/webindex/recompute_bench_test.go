package webindex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
)

// BenchmarkClusterRecompute measures what the cluster observer reads on
// every run (the cluster's state and members, their inlink counts and
// queued deltas) on an indexed corpus of 2,000 pages, one cluster per
// op, round robin. Nothing changed since the clusters were computed, so a
// run writes nothing, and each op's transaction is rolled back: what is
// measured is the reads, the cost every recompute pays before it knows
// whether anything changed.
func BenchmarkClusterRecompute(b *testing.B) {
	p := parseCorpus(b, corpusDocs(4, 2000))
	e, closeEnv := newBenchEnv(b, 5*time.Millisecond)
	defer closeEnv()
	e.loadAll(b, p.pages)
	e.settle(b)
	seen := map[string]bool{}
	var keys []string
	for _, pg := range p.pages {
		if k := webindex.ClusterKey(pg); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	errRollback := errors.New("rolled back")
	ctx := context.Background()
	i := 0
	for b.Loop() {
		key := keys[i%len(keys)]
		i++
		err := e.db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			if err := e.ix.Recompute(ctx, tx, key); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			b.Fatal(err)
		}
	}
}
