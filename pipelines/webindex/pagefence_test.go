package webindex_test

import (
	"context"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
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
			e := newEnv(t)
			ctx := context.Background()
			const u = "http://late.example/"
			var w webindex.PageWriter
			put := func(ctx context.Context, write func(context.Context, *framework.Txn, *extract.Page) (webindex.Change, error), title string) error {
				return e.db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
					_, err := write(ctx, tx, &extract.Page{URL: u, Title: title, Text: title + " text"})
					return err
				})
			}
			// w reads the fence, finds none, and remembers it: deleting a
			// page never loaded writes nothing.
			if err := e.db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
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
			st, err := e.ix.BulkLoad(ctx, e.db, parsePages(t, initialCorpus(newCorpus(6, 160))), &o)
			if err != nil {
				t.Fatalf("bulk load with pages written at %s: %v", point, err)
			}
			if st.Fenced != 1 {
				t.Errorf("%d pages recorded under the fence, want 1", st.Fenced)
			}
			e.settle()
			pv, err := e.ix.Page(ctx, e.db, u)
			if err != nil {
				t.Fatal(err)
			}
			if pv.Title != "newer" {
				t.Fatalf("page written at %s through the PageWriter: indexed title %q, want %q", point, pv.Title, "newer")
			}
		})
	}
}
