package loader_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is a store on disk with an oracle, as a loader that owns the data
// directory sees them: no runner has ever run on it.
type env struct {
	t  *testing.T
	st store.Store
	ts *oracle.Server
	db *framework.DB
	ix *webindex.Index
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := store.Open(t.TempDir(), framework.StoreOptions(&store.Options{Logger: quiet}))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ts.Close()
		st.Close()
	})
	return newEnvOn(t, st, ts)
}

// newEnvOn wraps an existing store and oracle (for a store wrapper, or a
// second loader on the same store).
func newEnvOn(t *testing.T, st store.Store, ts *oracle.Server) *env {
	t.Helper()
	db, err := framework.Open(context.Background(), st, ts, &framework.Options{Observers: webindex.Observers(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := webindex.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, st: st, ts: ts, db: db, ix: ix}
}

// problems collects what a run reported.
type problems struct {
	mu   sync.Mutex
	list []loader.Problem
}

func (p *problems) add(pr loader.Problem) {
	p.mu.Lock()
	p.list = append(p.list, pr)
	p.mu.Unlock()
}

// load runs a loader over src and fails the test on a Run error.
func (e *env) load(src iter.Seq2[input.Record, error], opts loader.Options) (loader.Summary, []loader.Problem) {
	e.t.Helper()
	s, ps, err := e.tryLoad(context.Background(), src, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return s, ps
}

func (e *env) tryLoad(ctx context.Context, src iter.Seq2[input.Record, error], opts loader.Options) (loader.Summary, []loader.Problem, error) {
	var ps problems
	opts.Logger = quiet
	opts.OnProblem = ps.add
	s, err := loader.Run(ctx, e.db, src, opts)
	return s, ps.list, err
}

// pages returns every loaded page: URL → title.
func (e *env) pages() map[string]string {
	e.t.Helper()
	ctx := context.Background()
	var urls []string
	err := e.db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for ent, err := range tx.Scan(ctx, framework.ScanOptions{Table: schema.PagesTable, Columns: []framework.Column{schema.Doc}}) {
			if err != nil {
				return err
			}
			urls = append(urls, string(ent.Row))
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range urls {
		pv, err := e.ix.Page(ctx, e.db, u)
		if err != nil {
			e.t.Fatal(err)
		}
		got[u] = pv.Title
	}
	return got
}

func (e *env) wantPages(want map[string]string) {
	e.t.Helper()
	if got := e.pages(); !maps.Equal(got, want) {
		e.t.Fatalf("pages:\n got %v\nwant %v", got, want)
	}
}

func (e *env) pending() int {
	e.t.Helper()
	n, err := admin.Pending(context.Background(), e.st, []string{schema.PagesTable})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// html is a small page whose title is title.
func html(title string) string {
	return fmt.Sprintf("<html><head><title>%s</title></head><body><p>about %s</p><a href=\"/other\">other</a></body></html>", title, strings.ToLower(title))
}

// records is a source yielding recs, with Source "mem" and Offset the index
// unless set.
func records(recs ...input.Record) iter.Seq2[input.Record, error] {
	return func(yield func(input.Record, error) bool) {
		for i, r := range recs {
			if r.Source == "" {
				r.Source, r.Offset = "mem", int64(i)
			}
			if !yield(r, nil) {
				return
			}
		}
	}
}

func put(url, body string) input.Record { return input.Record{URL: url, Body: []byte(body)} }
func del(url string) input.Record       { return input.Record{URL: url, Delete: true} }

func httpResp(status int, ctype, body string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d X\r\n", status)
	if ctype != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", ctype)
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	return b.Bytes()
}

func warcRec(typ, uri string, block []byte) []byte {
	var b bytes.Buffer
	b.WriteString("WARC/1.0\r\n")
	fmt.Fprintf(&b, "WARC-Type: %s\r\n", typ)
	if uri != "" {
		fmt.Fprintf(&b, "WARC-Target-URI: %s\r\n", uri)
	}
	b.WriteString("WARC-Date: 2024-01-01T00:00:00Z\r\n")
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(block))
	b.Write(block)
	b.WriteString("\r\n\r\n")
	return b.Bytes()
}

func htmlResp(uri, title string) []byte {
	return warcRec("response", uri, httpResp(200, "text/html; charset=utf-8", html(title)))
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkAccounting checks that every record read ended in one outcome.
func checkAccounting(t *testing.T, s loader.Summary) {
	t.Helper()
	if got := s.Stored() + s.Superseded + s.Bad + s.Failed + s.Abandoned; got != s.Read {
		t.Errorf("outcomes add up to %d, read %d: %+v", got, s.Read, s.Counts)
	}
}

func sortProblems(ps []loader.Problem) {
	slices.SortFunc(ps, func(a, b loader.Problem) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return int(a.Offset - b.Offset)
	})
}
