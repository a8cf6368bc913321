package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/internal/pgtest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/runner"
)

// exportedRows reads the web index's PostgreSQL table: its live rows, and
// how many rows are marked deleted.
func exportedRows(t *testing.T, ctx context.Context, dsn string) (map[string]schema.CanonicalRow, int) {
	t.Helper()
	sink, err := export.NewPostgresSink(ctx, dsn, (&exportFlags{}).postgres())
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	got, deleted := map[string]schema.CanonicalRow{}, 0
	if err := sink.Rows(ctx, func(e export.Entry) error {
		r, gone, err := schema.DecodeExported(e)
		if gone {
			deleted++
		} else {
			got[r.URL] = r
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return got, deleted
}

// TestExportToPostgres runs the web index with -export postgres (its DSN
// from TRICKLE_EXPORT_DSN), loads a corpus, kills the runner with SIGKILL
// in the middle of the export, restarts it, applies a crawler's step of
// updates, deletes and new pages, kills it again mid-export and restarts
// it: the table's live rows are then the canonical table of a
// from-scratch computation, and `runner status` names the table.
func TestExportToPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if code, _, stderr := runCmd(t, "-data", t.TempDir(), "-http", "127.0.0.1:0", "-export", "postgres"); code == 0 || !strings.Contains(stderr, "-export-dsn") {
		t.Fatalf("-export postgres without a DSN: exit %d, %q; want a failure naming -export-dsn", code, stderr)
	}
	t.Setenv("TRICKLE_EXPORT_DSN", srv.DSN())
	c, err := sample.New(sample.Options{Pages: 250, Seed: 31, BaseURL: "http://docs.example/"})
	if err != nil {
		t.Fatal(err)
	}
	k := exportThroughKills(t, ctx, c, 32, []string{"-export", "postgres"}, func(node *runner.Node, db *framework.DB) func() (int, uint64) {
		return func() (int, uint64) {
			queued, _ := exportState(t, ctx, node, db)
			live, deleted := exportedRows(t, ctx, srv.DSN())
			return queued, uint64(len(live) + deleted)
		}
	})
	pages, err := c.Pages()
	if err != nil {
		t.Fatal(err)
	}
	// Live rows only: a page the step deleted is a row marked deleted if
	// it was exported before (a page deleted before its first export
	// leaves none), which TestPostgresExportedTableEqualsBatch checks.
	got, _ := exportedRows(t, ctx, srv.DSN())
	if want := webindex.CanonicalTable(batch.Compute(pages)); !maps.Equal(got, want) {
		t.Fatalf("the PostgreSQL table holds %d live rows, want the %d of a from-scratch computation", len(got), len(want))
	}
	flags := []string{"-data", k.dir, "-nats-port", fmt.Sprint(k.port), "-log-level", "warn", "-export", "postgres"}
	code, out, _ := runCmd(t, append([]string{"status"}, flags...)...)
	if code != 0 || !strings.Contains(out, "PostgreSQL table "+exportTable+" at 127.0.0.1") || strings.Contains(out, "postgres://") {
		t.Fatalf("status: exit %d, %q; want the table and its host named, not the DSN", code, out)
	}
}
