package wordcount_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/trickle-dev/trickle/examples/wordcount"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/oracle"
	"github.com/trickle-dev/trickle/scanner"
	"github.com/trickle-dev/trickle/store"
)

// TestIncrementalEqualsBatch adds, changes and deletes documents while a
// scanner runs the observer, and checks the counts against a count of the
// final corpus from scratch.
func TestIncrementalEqualsBatch(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open("", &store.Options{FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	reg := framework.NewRegistry()
	if err := wordcount.Register(reg); err != nil {
		t.Fatal(err)
	}
	db, err := framework.New(st, ts, &framework.Options{Observed: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scanner.New(st, framework.NewWorker(db, reg), &scanner.Options{Tables: reg.Tables, IdleWait: 5 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- sc.Run(ctx) }()

	vocab := strings.Fields("the a of to and in is it that for on was with as be at by this had not are but from or have")
	rng := rand.New(rand.NewPCG(1, 2))
	docs := map[string]string{}
	for step := range 300 {
		id := fmt.Sprintf("doc%02d", rng.IntN(60))
		text := ""
		if step%7 != 0 { // every seventh step deletes
			var b strings.Builder
			for range 1 + rng.IntN(12) {
				b.WriteString(vocab[rng.IntN(len(vocab))] + " ")
			}
			text = b.String()
		}
		if err := wordcount.Put(context.Background(), db, id, text); err != nil {
			t.Fatal(err)
		}
		if text == "" {
			delete(docs, id)
		} else {
			docs[id] = text
		}
	}
	waitCtx, stopWaiting := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopWaiting()
	if err := framework.AwaitNoPending(waitCtx, st, reg.Tables(), 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	want := map[string]int{}
	for _, text := range docs {
		for _, w := range wordcount.Words(text) {
			want[w]++
		}
	}
	got, err := wordcount.Counts(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d words counted, want %d: %v vs %v", len(got), len(want), got, want)
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("%q: %d, want %d", w, got[w], n)
		}
	}
	t.Logf("%d observer runs for 300 document writes (collapsing), %d conflicts retried", sc.Stats().Ran.Load(), db.Stats().Conflicts.Load())
}
