package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/runner"
)

// TestCustomRunner runs this binary's registry in a runner (embedded NATS on
// a random port, store in a temporary directory), writes notes, waits until
// idle and checks what the observer computed.
func TestCustomRunner(t *testing.T) {
	reg, err := newRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, HTTPAddr: "off"}
	r, err := runner.Start(ctx, cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx) }()

	put := func(row, v string) {
		t.Helper()
		err := r.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			if v == "" {
				return tx.Delete("notes", []byte(row), text)
			}
			return tx.Set("notes", []byte(row), text, []byte(v))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("n1", "hello")
	put("n2", "world")
	put("n3", "bye")
	if _, err := runner.Wait(ctx, r.Node(), runner.WaitOptions{Poll: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	put("n3", "")
	put("n1", "hello again")
	if _, err := runner.Wait(ctx, r.Node(), runner.WaitOptions{Poll: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	err = r.DB().View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: "notes", Columns: []framework.Column{shout}}) {
			if err != nil {
				return err
			}
			got[string(e.Row)] = string(e.Value)
		}
		v, err := tx.Get(ctx, "stats", statRow, total)
		got["total"] = string(v)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"n1": "HELLO AGAIN", "n2": "WORLD", "total": "2"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
