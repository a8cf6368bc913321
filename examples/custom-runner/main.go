// Command custom-runner shows how to run your own observers: build a
// registry in main, hand it to the runner library, and you have a runner
// binary of your own.
//
// The observer here keeps a "shout" column equal to the upper-cased "text"
// column of every note, and counts how many notes exist in a second table —
// a cross-row, cross-table update made in the observer's own transaction.
//
// Run it, then feed it notes over HTTP:
//
//	go run ./examples/custom-runner
//	curl -X PUT --data 'hello' 'http://127.0.0.1:8081/notes?id=n1'
//	curl 'http://127.0.0.1:8081/notes'
//
// Flags (each also read from the environment variable shown by -help):
// -data (default custom-runner-data, so that it never joins a web index
// runner's ./data by accident), -http (default 127.0.0.1:8081, beside a
// runner's 8080), -nats (a deployment's NATS URL, to run as one of its
// processes).
package main

import (
	"context"
	"errors"
	"flag"
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
	cfg, err := parseConfig(os.Args[1:], os.LookupEnv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "custom-runner:", err)
		os.Exit(2)
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "custom-runner:", err)
		os.Exit(1)
	}
}

// run starts a runner for this binary's observers with the notes API on
// its HTTP mux, and runs it until ctx ends.
func run(ctx context.Context, cfg runner.Config) error {
	reg, err := newRegistry()
	if err != nil {
		return err
	}
	r, err := runner.Start(ctx, cfg, reg)
	if err != nil {
		return err
	}
	defer r.Close()
	mountNotes(r.Mux(), r.DB())
	if addr := r.HTTPAddr(); addr != "" {
		fmt.Fprintf(os.Stderr, "custom-runner: serving http://%s/ (data in %s)\n", addr, cfg.DataDir)
	}
	return r.Run(ctx)
}
