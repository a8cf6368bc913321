package wordcount_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/wordcount"
)

// TestIncrementalEqualsBatch adds, changes and deletes documents while a
// scanner runs the observer, and checks the counts against a count of the
// final corpus from scratch.
func TestIncrementalEqualsBatch(t *testing.T) {
	reg := framework.NewRegistry()
	if err := wordcount.Register(reg); err != nil {
		t.Fatal(err)
	}
	env, err := frameworktest.Start(context.Background(), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	db := env.DB()

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
	if err := env.WaitForObservers(waitCtx); err != nil {
		t.Fatal(err)
	}
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
	t.Logf("%d observer runs for 300 document writes (collapsing), %d conflicts retried", env.Stats().Runs, env.Stats().Conflicts)
}
