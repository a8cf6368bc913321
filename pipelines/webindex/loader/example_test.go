package loader_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/store"
)

func ExampleRun() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	st, _ := store.Open("", framework.StoreOptions(&store.Options{FS: vfs.NewMem(), Logger: quiet}))
	defer st.Close()
	ts, _ := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	defer ts.Close()
	// The loader's commits must notify the web index's observers.
	db, err := framework.Open(ctx, st, ts, &framework.Options{Observers: webindex.Observers(), Logger: quiet})
	if err != nil {
		panic(err)
	}

	feed := `{"url":"https://example.com/","html":"<title>Home</title><a href=\"/about\">About</a>"}
{"url":"https://example.com/about","html":"<title>About</title>"}
{"url":"ftp://example.com/","html":"<p>not the web</p>"}
{"url":"https://example.com/old","delete":true}
`
	var stats input.Stats
	src := input.JSONL("feed.jsonl", strings.NewReader(feed), input.Options{Stats: &stats})
	sum, err := loader.Run(ctx, db, src, loader.Options{
		Stats:     &stats,
		OnProblem: func(p loader.Problem) { fmt.Println(p.Kind, p.Reason, p.Where(), p.URL) },
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("read %d, loaded %d, unchanged %d, bad %d, ok %v\n", sum.Read, sum.Loaded, sum.Unchanged, sum.Bad, sum.OK())
	// Output:
	// bad record invalid-url feed.jsonl:3 ftp://example.com/
	// read 4, loaded 2, unchanged 1, bad 1, ok false
}
