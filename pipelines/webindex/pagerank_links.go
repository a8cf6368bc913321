package webindex

import (
	"context"
	"slices"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// A page's rank is sent along its links to loaded pages only, so a page's
// outlinks change not only with its own document but whenever one of its
// targets is loaded or unloaded. The page observer of the source reads its
// targets' ClusterOf cells to count them; the page observer of a target
// writes its own. Under snapshot isolation the two may run concurrently and
// neither see the other, so a new link also leaves a marker on the target's
// row (pr.new:<source>, holding what the source saw) and notifies the
// target's sources observer, which runs after both committed: it tells the
// source to recount if the target's state differs from what the source saw,
// and tells every source to recount when the target's state changes.

// indexPageRank is the page observer's share of the PageRank: url's
// document became cur (nil: deleted); before and after are its link
// targets in the old and new document, and wasLoaded says whether url had
// a cluster (was counted as loaded by its sources) before this run.
func (ix *Index) indexPageRank(ctx context.Context, tx *framework.Txn, url string, cur *extract.Page, before, after map[string]string, wasLoaded bool) error {
	loaded := cur != nil
	targets := otherTargets(after, url)
	out, err := loadedOf(ctx, tx, targets)
	if err != nil {
		return err
	}
	for _, t := range targets {
		if _, had := before[t]; had {
			continue
		}
		_, counted := slices.BinarySearch(out, t)
		saw := []byte{'0'}
		if counted {
			saw[0] = '1'
		}
		if err := tx.Set(schema.PagesTable, []byte(t), framework.Column{Family: schema.PRNewFamily, Qualifier: url}, saw); err != nil {
			return err
		}
		if err := tx.NotifyWeak(schema.PagesTable, []byte(t), schema.PRSources); err != nil {
			return err
		}
	}
	if loaded != wasLoaded {
		if err := tx.NotifyWeak(schema.PagesTable, []byte(url), schema.PRSources); err != nil {
			return err
		}
	}
	return ix.rebase(ctx, tx, url, out, loaded)
}

// loadedOf returns those of the sorted targets that are loaded (have a
// cluster) in tx's snapshot, sorted.
func loadedOf(ctx context.Context, tx *framework.Txn, targets []string) ([]string, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	rows := make([][]byte, len(targets))
	for i, t := range targets {
		rows[i] = []byte(t)
	}
	got, err := tx.GetRows(ctx, schema.PagesTable, rows, []framework.Column{schema.ClusterOf})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range targets {
		if _, ok := got[t][schema.ClusterOf]; ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// observeSources tells the sources of a URL's links to recount their
// outlinks where their count of it may be wrong: every source, when the
// URL was loaded or unloaded since its sources were last told; otherwise
// each source of a new link that saw the URL in the other state. It runs
// after the transactions that notified it committed, so it sees both a new
// link and a concurrent load of its target.
func (ix *Index) observeSources(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	url := string(row)
	_, loaded, err := tx.Lookup(ctx, schema.PagesTable, row, schema.ClusterOf)
	if err != nil {
		return err
	}
	_, announced, err := tx.Lookup(ctx, schema.PagesTable, row, schema.PRAnnounced)
	if err != nil {
		return err
	}
	recount := func(source string) error {
		if source == url {
			return nil
		}
		return tx.NotifyWeak(schema.PagesTable, []byte(source), schema.PRRecount)
	}
	for e, err := range tx.Scan(ctx, schema.RowScan(schema.PagesTable, url, schema.PRNewFamily)) {
		if err != nil {
			return err
		}
		if loaded == announced && (string(e.Value) == "1") != loaded {
			if err := recount(e.Column.Qualifier); err != nil {
				return err
			}
		}
		if err := tx.Delete(schema.PagesTable, row, e.Column); err != nil {
			return err
		}
	}
	if loaded == announced {
		return nil
	}
	for e, err := range tx.Scan(ctx, schema.RowScan(schema.PagesTable, url, schema.InlinkFamily)) {
		if err != nil {
			return err
		}
		if err := recount(e.Column.Qualifier); err != nil {
			return err
		}
	}
	if loaded {
		return tx.Set(schema.PagesTable, row, schema.PRAnnounced, nil)
	}
	return tx.Delete(schema.PagesTable, row, schema.PRAnnounced)
}

// otherTargets returns the targets of links (target -> anchor) but url
// itself, sorted: the pages url's rank flows to.
func otherTargets(links map[string]string, url string) []string {
	targets := make([]string, 0, len(links))
	for t := range links {
		if t != url {
			targets = append(targets, t)
		}
	}
	slices.Sort(targets)
	return targets
}

// observeRecount recounts a page's outlinks to loaded pages, as last
// indexed, and rebases its rank on them.
func (ix *Index) observeRecount(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	url := string(row)
	doc, err := schema.ReadDoc(ctx, tx, url, schema.Indexed)
	if err != nil {
		return err
	}
	out, err := loadedOf(ctx, tx, otherTargets(schema.Anchors(doc), url))
	if err != nil {
		return err
	}
	return ix.rebase(ctx, tx, url, out, doc != nil)
}
