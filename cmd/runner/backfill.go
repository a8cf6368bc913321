package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/runner"
)

// backfill is the backfill command: it notifies every existing cell of
// the observer's columns through node, printing its progress about once
// a second, and its count at the end.
func backfill(ctx context.Context, node *runner.Node, observer string, o *options, stdout io.Writer) error {
	if o.backfillRows < 1 {
		return fmt.Errorf("-batch-rows %d: want a positive number of rows", o.backfillRows)
	}
	db, err := node.OpenDB(ctx, nil)
	if err != nil {
		return err
	}
	began, last := time.Now(), time.Now()
	first := true
	p, err := admin.Backfill(ctx, db, observer, &admin.BackfillOptions{BatchRows: o.backfillRows, Restart: o.restart,
		Progress: func(p admin.BackfillProgress) {
			if first && p.Resumed {
				fmt.Fprintf(stdout, "resuming the backfill of %s begun %s\n", observer, p.Started.Local().Format(time.RFC3339))
			}
			first = false
			if time.Since(last) >= time.Second && !p.Done {
				last = time.Now()
				fmt.Fprintf(stdout, "%s: %d rows, %d cells notified, at row %q\n", observer, p.Rows, p.Cells, p.Next)
			}
		}})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backfilled %s: %d rows, %d cells of table %s notified in %v; `runner wait` returns once it has run for them\n",
		observer, p.Rows, p.Cells, p.Table, time.Since(began).Round(time.Millisecond))
	return nil
}
