package webindex_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
)

// A PageWriter that last saw no fence does not skip the fence of a bulk
// load that lets page writes in (at its afterFence point) or has written
// its import (afterImport): a page it writes then is recorded under the
// fence, after the same page written by PutPage, and is the one indexed
// once the fence closes. A write that slipped past the fence would make
// the import give up (ErrNotEmpty), or be written over by the older page
// recorded under the fence when the fence closes.
func TestPageWriterDoesNotSlipPastABulkLoad(t *testing.T) {
	for _, point := range []string{"afterFence", "afterImport"} {
		t.Run(point, func(t *testing.T) {
			e := indextest.New(t)
			ctx := context.Background()
			const u = "http://late.example/"
			var w webindex.PageWriter
			put := func(ctx context.Context, write func(context.Context, *framework.Txn, *extract.Page) (webindex.Change, error), title string) error {
				return e.DB.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
					_, err := write(ctx, tx, &extract.Page{URL: u, Title: title, Text: title + " text"})
					return err
				})
			}
			// w reads the fence, finds none, and remembers it: deleting a
			// page never loaded writes nothing.
			if err := e.DB.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
				_, err := w.DeletePage(ctx, tx, u)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			during := func(ctx context.Context) error {
				if err := put(ctx, webindex.PutPage, "older"); err != nil {
					return err
				}
				return put(ctx, w.PutPage, "newer")
			}
			var o webindex.BulkOptions
			if point == "afterFence" {
				webindex.BulkHooks(&o, during, nil)
			} else {
				webindex.BulkHooks(&o, nil, during)
			}
			st, err := e.Index.BulkLoad(ctx, e.DB, parsePages(t, initialCorpus(indextest.NewCorpus(6, 160))), &o)
			if err != nil {
				t.Fatalf("bulk load with pages written at %s: %v", point, err)
			}
			if st.Fenced != 1 {
				t.Errorf("%d pages recorded under the fence, want 1", st.Fenced)
			}
			e.Settle()
			pv, err := e.Index.Page(ctx, e.DB, u)
			if err != nil {
				t.Fatal(err)
			}
			if pv.Title != "newer" {
				t.Fatalf("page written at %s through the PageWriter: indexed title %q, want %q", point, pv.Title, "newer")
			}
		})
	}
}

// PutCanonical and DeleteCanonical, which do not normalize the URL again,
// still refuse what is not a URL, or a page under another URL, naming it;
// PutPage still refuses a URL that is not normalized.
func TestCanonicalWritesCheckTheirURL(t *testing.T) {
	e := indextest.New(t)
	var w webindex.PageWriter
	u, err := extract.NormalizeURL("http://a.example/x")
	if err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func(context.Context, *framework.Txn) (webindex.Change, error){
		"zero URL": func(ctx context.Context, tx *framework.Txn) (webindex.Change, error) {
			return w.PutCanonical(ctx, tx, extract.CanonicalURL{}, &extract.Page{URL: ""})
		},
		"zero URL deleted": func(ctx context.Context, tx *framework.Txn) (webindex.Change, error) {
			return w.DeleteCanonical(ctx, tx, extract.CanonicalURL{})
		},
		"page of another URL": func(ctx context.Context, tx *framework.Txn) (webindex.Change, error) {
			return w.PutCanonical(ctx, tx, u, &extract.Page{URL: "http://b.example/"})
		},
		"URL not normalized": func(ctx context.Context, tx *framework.Txn) (webindex.Change, error) {
			return w.PutPage(ctx, tx, &extract.Page{URL: "HTTP://a.example/x"})
		},
	} {
		err := e.DB.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			_, err := write(ctx, tx)
			return err
		})
		if err == nil {
			t.Errorf("%s: written", name)
		}
	}
	err = e.DB.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		c, err := w.PutCanonical(ctx, tx, u, &extract.Page{URL: u.String(), Title: "x"})
		if err == nil && c != webindex.Added {
			err = fmt.Errorf("change %v, want added", c)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
