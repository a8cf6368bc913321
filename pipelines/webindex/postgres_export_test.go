package webindex_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/internal/pgtest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// The web index exported into PostgreSQL (jsonb values, as the runner's
// -export postgres does) follows loads, updates and deletes: once the
// observers are idle, the table's live rows are the canonical table of a
// from-scratch computation, and deleted pages are rows marked deleted.
func TestPostgresExportedTableEqualsBatch(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	sink, err := export.NewPostgresSink(ctx, srv.DSN(), export.PostgresOptions{Table: "webindex_export", Values: export.JSONB, Logger: indextest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	e := newDeployment(t).startExportingTo(t, sink)
	// read decodes the table's live rows into a consumer's table, checking
	// each row as an exported entry.
	read := func() (*consumer, int) {
		c := &consumer{t: t, table: export.NewTable()}
		deleted := 0
		if err := sink.Rows(ctx, func(e export.Entry) error {
			if e.Delete {
				deleted++
			}
			if _, _, err := schema.DecodeExported(e); err != nil {
				return err
			}
			c.table.Apply(e)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return c, deleted
	}
	cor := indextest.NewCorpus(14, 140)
	first := map[string]string{}
	for _, u := range cor.URLs[:110] {
		first[u] = cor.HTML(u)
	}
	cor.Apply(first)
	e.Load(first)
	e.Settle()
	c, _ := read()
	sameTable(t, "loaded", c, webindex.CanonicalTable(cor.Expected(t)))
	deletes := 0
	for round := range 2 {
		changes := changeSome(cor, 40)
		for _, h := range changes {
			if h == "" {
				deletes++
			}
		}
		e.Load(changes)
		e.Settle()
		c, deleted := read()
		sameTable(t, fmt.Sprintf("round %d", round), c, webindex.CanonicalTable(cor.Expected(t)))
		if deletes > 0 && deleted == 0 {
			t.Fatalf("round %d: %d pages deleted, no row marked deleted", round, deletes)
		}
	}
	if deletes == 0 {
		t.Fatal("no page was deleted: the test did not cover deletes")
	}
}
