package webindex_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is an in-memory deployment running the index's observers.
type env struct {
	t   testing.TB
	fw  *frameworktest.Env
	st  store.Store
	db  *framework.DB
	reg *framework.Registry
	ix  *webindex.Index
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with an index built from opts.
func newEnvWith(t testing.TB, opts *webindex.Options) *env {
	t.Helper()
	ix, err := webindex.New(noDelay(opts))
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWithIndex(t, ix)
}

// newEnvOn is newEnv on st (nil: a fresh store in memory).
func newEnvOn(t testing.TB, st store.Store) *env {
	t.Helper()
	ix, err := webindex.New(noDelay(nil))
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWithIndexOn(t, ix, st)
}

// noDelay returns opts (nil: the defaults) with no RecomputeDelay unless
// one is set: the tests settle the index hundreds of times, each waiting
// out the default delay otherwise. TestRecomputesWaitOutTheDelay covers
// the default.
func noDelay(opts *webindex.Options) *webindex.Options {
	var o webindex.Options
	if opts != nil {
		o = *opts
	}
	if o.RecomputeDelay == 0 {
		o.RecomputeDelay = -1
	}
	return &o
}

// newEnvWithIndex is newEnv running ix's observers.
func newEnvWithIndex(t testing.TB, ix *webindex.Index) *env {
	t.Helper()
	return newEnvWithIndexOn(t, ix, nil)
}

// newEnvWithIndexOn is newEnvWithIndex on st (nil: a fresh store in
// memory).
func newEnvWithIndexOn(t testing.TB, ix *webindex.Index, st store.Store) *env {
	t.Helper()
	reg := framework.NewRegistry()
	if err := ix.Register(reg); err != nil {
		t.Fatal(err)
	}
	fw, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Store: st, Workers: 16, IdleWait: 2 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close() })
	return &env{t: t, fw: fw, st: fw.Store(), db: fw.DB(), reg: reg, ix: ix}
}

// load writes changes (URL → HTML, "" deletes) from several concurrent
// transactions while the observers run.
func (e *env) load(changes map[string]string) {
	e.t.Helper()
	var urls []string
	for u := range changes {
		urls = append(urls, u)
	}
	slices.Sort(urls)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(urls); i += 4 {
				u, h := urls[i], changes[urls[i]]
				err := e.db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
					if h == "" {
						_, err := webindex.DeletePage(ctx, tx, u)
						return err
					}
					p, err := extract.Parse(u, strings.NewReader(h), 1<<20)
					if err != nil {
						return err
					}
					_, err = webindex.PutPage(ctx, tx, p)
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
}

// settle waits until the observers are done.
func (e *env) settle() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.fw.WaitForObservers(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// put stores pages, built by hand rather than parsed, one transaction
// each, and returns what each PutPage did.
func (e *env) put(pages ...*extract.Page) []webindex.Change {
	e.t.Helper()
	changes := make([]webindex.Change, len(pages))
	for i, p := range pages {
		err := e.db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			c, err := webindex.PutPage(ctx, tx, p)
			changes[i] = c
			return err
		})
		if err != nil {
			e.t.Fatalf("putting %s: %v", p.URL, err)
		}
	}
	return changes
}

// reader returns a DB that reads the env's data through st, which wraps
// the env's store; it runs no observers.
func (e *env) reader(st store.Store) *framework.DB {
	e.t.Helper()
	if frameworktest.OnTiKV() {
		// A wrapped store is not the TiKV store: the DB would run the
		// framework's protocol over the store's cells, where the TiKV
		// engine keeps nothing.
		e.t.Skip("counts the reads of the engine over a store's cells; TiKV's engine reads TiKV directly")
	}
	db, err := framework.Open(context.Background(), st, e.fw.Oracle(), &framework.Options{Logger: quiet})
	if err != nil {
		e.t.Fatal(err)
	}
	return db
}
