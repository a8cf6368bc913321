package query

import (
	"context"
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// InlinkPage is one page of the links into a page's cluster.
type InlinkPage struct {
	// Total is the number of links into the cluster from outside it.
	Total  int             `json:"total"`
	Offset int             `json:"offset"`
	Links  []schema.Inlink `json:"links"`
}

// OutlinkPage is one page of a page's own links.
type OutlinkPage struct {
	Total  int       `json:"total"`
	Offset int       `json:"offset"`
	Links  []Outlink `json:"links"`
}

// Inlinks returns the links into url's cluster from outside it (what
// PageView.Inlinks lists), sorted by source then target, from offset on,
// at most limit (capped at Options.MaxResults). For a page alone in its
// cluster (nearly every page) it reads its inlink count and offset + limit
// inlink cells, however many links point at it; for a cluster with
// duplicates it reads all of their inlinks. A page that is not loaded is
// ErrPageNotFound; a url Normalize rejects wraps extract.ErrBadURL.
func (ix *Engine) Inlinks(ctx context.Context, db *framework.DB, url string, offset, limit int) (*InlinkPage, error) {
	norm, err := extract.Normalize(url)
	if err != nil {
		return nil, fmt.Errorf("webindex: %w", err)
	}
	offset, limit = ix.window(offset, limit)
	page := &InlinkPage{Offset: offset, Links: []schema.Inlink{}}
	err = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		page.Links = page.Links[:0]
		if err := mustBeLoaded(ctx, tx, norm); err != nil {
			return err
		}
		key, err := tx.Get(ctx, schema.PagesTable, []byte(norm), schema.ClusterOf)
		if err != nil && !errors.Is(err, framework.ErrNotFound) {
			return err
		}
		var ms []string
		if len(key) > 0 {
			if ms, err = schema.Members(ctx, tx, string(key)); err != nil {
				return err
			}
		}
		if len(ms) > 1 {
			v, err := ranking.ComputeView(ctx, tx, ix.opts.Ranker, string(key), true, false)
			if err != nil {
				return err
			}
			page.Total = len(v.Inlinks)
			if offset < len(v.Inlinks) {
				page.Links = append(page.Links, v.Inlinks[offset:min(len(v.Inlinks), offset+limit)]...)
			}
			return nil
		}
		n, err := schema.CountInlinks(ctx, tx, norm)
		if err != nil {
			return err
		}
		page.Total = int(n)
		i := 0
		for e, err := range tx.Scan(ctx, schema.RowScan(schema.PagesTable, norm, schema.InlinkFamily)) {
			if err != nil {
				return err
			}
			if i++; i <= offset {
				continue
			}
			if len(page.Links) == limit {
				break
			}
			l, err := schema.DecodeInlink(norm, e)
			if err != nil {
				return err
			}
			page.Links = append(page.Links, l)
		}
		return nil
	})
	return page, err
}

// Outlinks returns url's own links, in the order of the document, from
// offset on, at most limit (capped at Options.MaxResults). It reads the
// page's document.
func (ix *Engine) Outlinks(ctx context.Context, db *framework.DB, url string, offset, limit int) (*OutlinkPage, error) {
	norm, err := extract.Normalize(url)
	if err != nil {
		return nil, fmt.Errorf("webindex: %w", err)
	}
	offset, limit = ix.window(offset, limit)
	page := &OutlinkPage{Offset: offset, Links: []Outlink{}}
	err = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		doc, err := loadedDoc(ctx, tx, norm)
		if err != nil {
			return err
		}
		all := outlinks(doc)
		page.Total = len(all)
		page.Links = append(page.Links[:0], all[min(offset, len(all)):min(len(all), offset+limit)]...)
		return nil
	})
	return page, err
}

// mustBeLoaded returns ErrPageNotFound unless url is loaded. It reads the
// page's summary (or, in a store written before summaries, its document).
func mustBeLoaded(ctx context.Context, tx *framework.Txn, url string) error {
	_, err := tx.Get(ctx, schema.PagesTable, []byte(url), schema.SummaryCol)
	if errors.Is(err, framework.ErrNotFound) {
		_, err = loadedDoc(ctx, tx, url)
	}
	return err
}

// loadedDoc reads url's loaded document; ErrPageNotFound if there is none.
func loadedDoc(ctx context.Context, tx *framework.Txn, url string) (*extract.Page, error) {
	doc, err := schema.ReadDoc(ctx, tx, url, schema.Doc)
	if err == nil && doc == nil {
		err = fmt.Errorf("%w: %s", ErrPageNotFound, url)
	}
	return doc, err
}

// window bounds a requested page of a list: offset at least 0, limit
// between 0 and Options.MaxResults.
func (ix *Engine) window(offset, limit int) (int, int) {
	return max(offset, 0), min(max(limit, 0), ix.opts.MaxResults)
}
