package indextest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"

	"github.com/trickle-dev/trickle/framework"

	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/store"
)

// Quiet is a logger that logs nothing.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Env is an in-memory deployment running the index's observers.
type Env struct {
	T testing.TB
	// FW is the framework's test environment the observers run in, on
	// Store, with DB open over it and Registry holding Index's observers.
	FW       *frameworktest.Env
	Store    store.Store
	DB       *framework.DB
	Registry *framework.Registry
	Index    *webindex.Index
}

// New is an Env with an index of default options (and no recompute delay).
func New(t testing.TB) *Env {
	t.Helper()
	return NewWith(t, nil)
}

// NewWith is New with an index built from opts.
func NewWith(t testing.TB, opts *webindex.Options) *Env {
	t.Helper()
	ix, err := webindex.New(NoDelay(opts))
	if err != nil {
		t.Fatal(err)
	}
	return NewWithIndex(t, ix)
}

// NewOn is New on st (nil: a fresh store in memory).
func NewOn(t testing.TB, st store.Store) *Env {
	t.Helper()
	ix, err := webindex.New(NoDelay(nil))
	if err != nil {
		t.Fatal(err)
	}
	return NewWithIndexOn(t, ix, st)
}

// NoDelay returns opts (nil: the defaults) with no RecomputeDelay unless
// one is set: the tests settle the index hundreds of times, each waiting
// out the default delay otherwise. TestRecomputesWaitOutTheDelay covers
// the default.
func NoDelay(opts *webindex.Options) *webindex.Options {
	var o webindex.Options
	if opts != nil {
		o = *opts
	}
	if o.RecomputeDelay == 0 {
		o.RecomputeDelay = -1
	}
	return &o
}

// NewWithIndex is New running ix's observers.
func NewWithIndex(t testing.TB, ix *webindex.Index) *Env {
	t.Helper()
	return NewWithIndexOn(t, ix, nil)
}

// NewWithIndexOn is NewWithIndex on st (nil: a fresh store in
// memory).
func NewWithIndexOn(t testing.TB, ix *webindex.Index, st store.Store) *Env {
	t.Helper()
	reg := framework.NewRegistry()
	if err := ix.Register(reg); err != nil {
		t.Fatal(err)
	}
	fw, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Store: st, Workers: 16, IdleWait: 2 * time.Millisecond, Logger: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close() })
	return &Env{T: t, FW: fw, Store: fw.Store(), DB: fw.DB(), Registry: reg, Index: ix}
}

// Load writes changes (URL → HTML, "" deletes) from several concurrent
// transactions while the observers run.
func (e *Env) Load(changes map[string]string) {
	e.T.Helper()
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
				err := e.DB.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
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
		e.T.Fatal(err)
	}
}

// Settle waits until the observers are done.
func (e *Env) Settle() {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.FW.WaitForObservers(ctx); err != nil {
		e.T.Fatal(err)
	}
}

// Put stores pages, built by hand rather than parsed, one transaction
// each, and returns what each PutPage did.
func (e *Env) Put(pages ...*extract.Page) []webindex.Change {
	e.T.Helper()
	changes := make([]webindex.Change, len(pages))
	for i, p := range pages {
		err := e.DB.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			c, err := webindex.PutPage(ctx, tx, p)
			changes[i] = c
			return err
		})
		if err != nil {
			e.T.Fatalf("putting %s: %v", p.URL, err)
		}
	}
	return changes
}

// Reader returns a DB that reads the env's data through st, which wraps
// the env's store; it runs no observers.
func (e *Env) Reader(st store.Store) *framework.DB {
	e.T.Helper()
	if frameworktest.OnTiKV() {
		// A wrapped store is not the TiKV store: the DB would run the
		// framework's protocol over the store's cells, where the TiKV
		// engine keeps nothing.
		e.T.Skip("counts the reads of the engine over a store's cells; TiKV's engine reads TiKV directly")
	}
	db, err := framework.Open(context.Background(), st, e.FW.Oracle(), &framework.Options{Logger: Quiet})
	if err != nil {
		e.T.Fatal(err)
	}
	return db
}

// Now returns a timestamp the oracle handed out after everything done so
// far: a snapshot of the index as it is.
func (e *Env) Now() uint64 {
	e.T.Helper()
	var ts uint64
	if err := e.DB.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		ts = tx.StartTs()
		return nil
	}); err != nil {
		e.T.Fatal(err)
	}
	return ts
}

func PageMap(pages []*extract.Page) map[string]*extract.Page {
	m := map[string]*extract.Page{}
	for _, p := range pages {
		m[p.URL] = p
	}
	return m
}

// Serve runs one request through h and decodes its JSON reply into v.
func Serve(t *testing.T, h http.Handler, path string, v any) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("GET %s: %v: %.200s", path, err, rec.Body.Bytes())
		}
	}
	return rec
}
