// Command custom-runner shows how to run your own observers: build a
// registry in main, hand it to the runner library, and you have a runner
// binary with every flag-free default of cmd/runner (embedded NATS, store in
// ./data, joining an existing owner automatically).
//
// The observer here keeps a "shout" column equal to the upper-cased "text"
// column of every note, and counts how many notes exist in a second table —
// a cross-row, cross-table update made in the observer's own transaction.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/runner"
)

var (
	text    = framework.Column{Family: "note", Qualifier: "text"}
	shout   = framework.Column{Family: "note", Qualifier: "shout"}
	total   = framework.Column{Family: "stat", Qualifier: "notes"}
	statRow = []byte("all")
)

// shouter is the observer: it runs in its own transaction whenever a note's
// text changes.
func shouter(ctx context.Context, tx *framework.Txn, row []byte, col framework.Column) error {
	v, err := tx.Get(ctx, "notes", row, col)
	deleted := errors.Is(err, framework.ErrNotFound)
	if err != nil && !deleted {
		return err
	}
	_, err = tx.Get(ctx, "notes", row, shout)
	existed := err == nil
	if err != nil && !errors.Is(err, framework.ErrNotFound) {
		return err
	}
	delta := 0
	switch {
	case deleted && existed:
		delta = -1
		err = tx.Delete("notes", row, shout)
	case deleted:
		return nil
	default:
		if !existed {
			delta = 1
		}
		err = tx.Set("notes", row, shout, []byte(strings.ToUpper(string(v))))
	}
	if err != nil || delta == 0 {
		return err
	}
	n := 0
	if v, err := tx.Get(ctx, "stats", statRow, total); err == nil {
		n, _ = strconv.Atoi(string(v))
	} else if !errors.Is(err, framework.ErrNotFound) {
		return err
	}
	return tx.Set("stats", statRow, total, []byte(strconv.Itoa(n+delta)))
}

// newRegistry is the explicit list of this binary's observers.
func newRegistry() (*framework.Registry, error) {
	reg := framework.NewRegistry()
	err := reg.Register(framework.Observer{
		Name: "shouter", Table: "notes", Columns: []framework.Column{text}, Kind: framework.Strong, Fn: shouter,
	})
	return reg, err
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg, err := newRegistry()
	if err == nil {
		err = runner.Run(ctx, runner.Config{}, reg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "custom-runner:", err)
		os.Exit(1)
	}
}
