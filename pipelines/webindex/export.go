package webindex

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// exportObserver exports a page's row when it changes (Options.Export).
const exportObserver = "webindex-export"

// ExportObserver is the name of the observer that exports the canonical
// table: the one to backfill (runner backfill webindex-export) when export
// is turned on for an index already loaded.
const ExportObserver = exportObserver

// updateRows writes the row of every member of the cluster whose view v
// is, where it changed: canonical, inbound count, rank or title.
func (ix *Index) updateRows(ctx context.Context, tx *framework.Txn, v *ranking.View) error {
	if ix.knobs.noRows {
		return nil
	}
	got := v.Cells
	var err error
	if got == nil {
		rows := make([][]byte, len(v.Members))
		for i, m := range v.Members {
			rows[i] = []byte(m)
		}
		if got, err = tx.GetRows(ctx, schema.PagesTable, rows, []framework.Column{schema.RowCol, schema.SummaryCol}); err != nil {
			return err
		}
	}
	for _, m := range v.Members {
		cells := got[m]
		var s schema.Summary
		if b, ok := cells[schema.SummaryCol]; ok {
			if s, err = schema.DecodeSummary(b); err != nil {
				return fmt.Errorf("%s %s: %w", m, schema.SummaryCol, err)
			}
		} else if s, err = schema.ReadSummary(ctx, tx, m); err != nil { // a store from before summaries
			return err
		}
		want := schema.EncodeRow(schema.CanonicalRow{Title: s.Title, Canonical: v.Canonical, InboundCount: v.Inbound, Rank: v.Ranks[m]})
		if have, ok := cells[schema.RowCol]; ok && bytes.Equal(have, want) {
			continue
		}
		if err := tx.Set(schema.PagesTable, []byte(m), schema.RowCol, want); err != nil {
			return err
		}
	}
	return nil
}

// keepRowTitle is the page observer's part of the page's row: deleted
// with the page (cur nil), its title changed with the page's. The rest
// of the row is the cluster observer's.
func (ix *Index) keepRowTitle(ctx context.Context, tx *framework.Txn, url string, cur *extract.Page) error {
	if ix.knobs.noRows {
		return nil
	}
	b, found, err := tx.Lookup(ctx, schema.PagesTable, []byte(url), schema.RowCol)
	if err != nil || !found {
		return err
	}
	if cur == nil {
		return tx.Delete(schema.PagesTable, []byte(url), schema.RowCol)
	}
	r, err := schema.DecodeRow(url, b)
	if err != nil {
		return err
	}
	if t := schema.ListTitle(cur.Title); r.Title != t {
		r.Title = t
		return tx.Set(schema.PagesTable, []byte(url), schema.RowCol, schema.EncodeRow(r))
	}
	return nil
}

// observeRow is the export observer: it exports the page's row as it is
// now, or its deletion.
func (ix *Index) observeRow(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	q := ix.opts.Export
	b, found, err := tx.Lookup(ctx, schema.PagesTable, row, schema.RowCol)
	if err != nil {
		return err
	}
	if !found {
		return q.Delete(tx, row)
	}
	r, err := schema.DecodeRow(string(row), b)
	if err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return q.Add(tx, row, v)
}

// CanonicalTable is the canonical table of a from-scratch computation:
// what a consumer of the index's export holds once the index is up to
// date.
func CanonicalTable(want *batch.Index) map[string]schema.CanonicalRow {
	out := make(map[string]schema.CanonicalRow, want.Len())
	for _, u := range want.URLs() {
		p, _ := want.Page(u)
		out[u] = schema.CanonicalRow{URL: u, Title: schema.ListTitle(p.Title), Canonical: p.Canonical, InboundCount: p.InboundCount, Rank: p.Rank}
	}
	return out
}

// ReadExported rebuilds the canonical table from the stream a
// JetStreamSink filled with the index's export (opts.Queue: the queue's
// name), keeping per URL the entry with the highest sequence number, as
// a consumer of the export must: once the index is up to date and every
// entry exported, it is CanonicalTable of the loaded pages. It returns
// the table and how many messages it read.
func ReadExported(ctx context.Context, nc *nats.Conn, opts export.ConsumeOptions) (map[string]schema.CanonicalRow, int, error) {
	t := export.NewTable()
	n, err := export.Consume(ctx, nc, opts, func(_ string, e export.Entry) error {
		if _, _, err := schema.DecodeExported(e); err != nil {
			return err
		}
		t.Apply(e)
		return nil
	})
	if err != nil {
		return nil, n, err
	}
	out := map[string]schema.CanonicalRow{}
	for k, v := range t.Values() {
		r, _, err := schema.DecodeExported(export.Entry{Key: []byte(k), Value: v})
		if err != nil {
			return nil, n, err
		}
		out[k] = r
	}
	return out, n, nil
}
