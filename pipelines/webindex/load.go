package webindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// Change says what PutPage or DeletePage did to a page.
type Change int

// Changes.
const (
	// Unchanged: the stored document already equals the new one (or a
	// deleted page was not loaded); nothing was written and no observer
	// will run.
	Unchanged Change = iota
	// Added: the page was not loaded before.
	Added
	// Replaced: the page was loaded with a different document.
	Replaced
	// Deleted: the page was loaded and is now removed.
	Deleted
)

func (c Change) String() string {
	switch c {
	case Unchanged:
		return "unchanged"
	case Added:
		return "added"
	case Replaced:
		return "replaced"
	case Deleted:
		return "deleted"
	}
	return fmt.Sprintf("Change(%d)", int(c))
}

// PutPage stores p as the current version of the page p.URL (which must be
// normalized, as extract.Parse returns it) in tx, with the summary that
// search results and top lists show of it. Storing a document equal to the
// stored one writes nothing, so re-loading an unchanged corpus triggers no
// work; the one exception is a page stored before summaries existed, whose
// missing summary (or excerpt) is written then (no observer watches it). The index
// follows once tx commits and the observers run. While a bulk load
// imports the index, the page is recorded under its fence instead, and
// indexed when the import is complete (see BulkLoad). PutPage reads the
// fence for every page; a PageWriter reads it only while a bulk load may
// be under way.
func PutPage(ctx context.Context, tx *framework.Txn, p *extract.Page) (Change, error) {
	return putPage(ctx, tx, nil, p)
}

func putPage(ctx context.Context, tx *framework.Txn, w *PageWriter, p *extract.Page) (Change, error) {
	if p == nil || p.URL == "" {
		return Unchanged, errors.New("webindex: PutPage: page without URL")
	}
	if norm, err := extract.Normalize(p.URL); err != nil || norm != p.URL {
		return Unchanged, fmt.Errorf("webindex: PutPage: URL %q is not normalized", p.URL)
	}
	return putNormalized(ctx, tx, w, p)
}

// putNormalized is PutPage of a page whose URL is known to be normalized.
func putNormalized(ctx context.Context, tx *framework.Txn, w *PageWriter, p *extract.Page) (Change, error) {
	f, err := w.pageFence(ctx, tx)
	switch {
	case err != nil:
		return Unchanged, err
	case f != nil && f.phase == phaseImporting:
		return putFenced(ctx, tx, f, p)
	case f != nil:
		if err := settle(ctx, tx, p.URL); err != nil {
			return Unchanged, err
		}
	}
	row := []byte(p.URL)
	enc, sum := schema.EncodeDoc(p), schema.EncodeSummary(schema.Summarize(p))
	old, err := tx.Get(ctx, schema.PagesTable, row, schema.Doc)
	change := Replaced
	switch {
	case errors.Is(err, framework.ErrNotFound):
		change = Added
	case err != nil:
		return Unchanged, err
	case bytes.Equal(old, enc):
		stored, err := tx.Get(ctx, schema.PagesTable, row, schema.SummaryCol)
		switch {
		case errors.Is(err, framework.ErrNotFound):
		case err != nil:
			return Unchanged, err
		case bytes.Equal(stored, sum):
			if _, found, err := tx.Lookup(ctx, schema.PagesTable, row, schema.ExcerptCol); err != nil || found {
				return Unchanged, err
			}
		}
		return Unchanged, schema.SetListCells(tx, p)
	}
	if err := tx.Set(schema.PagesTable, row, schema.Doc, enc); err != nil {
		return Unchanged, err
	}
	return change, schema.SetListCells(tx, p)
}

// DeletePage removes the page url (normalized first) and its summary in
// tx; the index drops it, its links, terms and cluster membership once the
// observers run. Like PutPage, it reads the bulk load fence every time.
func DeletePage(ctx context.Context, tx *framework.Txn, url string) (Change, error) {
	return deletePage(ctx, tx, nil, url)
}

func deletePage(ctx context.Context, tx *framework.Txn, w *PageWriter, url string) (Change, error) {
	norm, err := extract.Normalize(url)
	if err != nil {
		return Unchanged, fmt.Errorf("webindex: DeletePage: %w", err)
	}
	return deleteNormalized(ctx, tx, w, norm)
}

// deleteNormalized is DeletePage of a normalized URL.
func deleteNormalized(ctx context.Context, tx *framework.Txn, w *PageWriter, norm string) (Change, error) {
	f, err := w.pageFence(ctx, tx)
	switch {
	case err != nil:
		return Unchanged, err
	case f != nil && f.phase == phaseImporting:
		return deleteFenced(ctx, tx, f, norm)
	case f != nil:
		if err := settle(ctx, tx, norm); err != nil {
			return Unchanged, err
		}
	}
	row := []byte(norm)
	_, err = tx.Get(ctx, schema.PagesTable, row, schema.Doc)
	switch {
	case errors.Is(err, framework.ErrNotFound):
		return Unchanged, nil
	case err != nil:
		return Unchanged, err
	}
	if err := tx.Delete(schema.PagesTable, row, schema.Doc); err != nil {
		return Unchanged, err
	}
	return Deleted, schema.DeleteListCells(tx, norm)
}
