package webindex

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// CanonicalRow is a page's row of the canonical table, what the index
// exports (Options.Export) to the systems people query: every loaded
// page with its duplicate cluster's canonical and inbound count and its
// own rank, keyed by URL. It is the JSON value of each exported entry; a
// deleted page is exported as a tombstone.
type CanonicalRow struct {
	URL string `json:"url"`
	// Title is the page's title cut to MaxTitleBytes, as lists show it.
	Title string `json:"title"`
	// Canonical is the URL representing the page's cluster (the page
	// itself when it is the canonical).
	Canonical string `json:"canonical"`
	// InboundCount is the canonical's: distinct pages outside the cluster
	// linking into it.
	InboundCount int64 `json:"inbound_count"`
	// Rank is the page's own rank (by default its number of linking
	// pages), which chose the canonical.
	Rank int64 `json:"rank"`
}

// rowCol is a page's row of the canonical table (an encoded CanonicalRow
// without its URL, the row key). The cluster observer writes it for each
// member whose row changed; the page observer keeps its title current
// and deletes it with the page. The export observer, when there is one,
// exports it whenever it changes: its runs for one URL write the URL's
// ack cell, so two of them conflict and the later one has the higher
// sequence number, as the export queue's consumers need.
var rowCol = framework.Column{Family: "page", Qualifier: "row"}

// exportObserver exports a page's row when it changes (Options.Export).
const exportObserver = "webindex-export"

// ExportObserver is the name of the observer that exports the canonical
// table: the one to backfill (runner backfill webindex-export) when export
// is turned on for an index already loaded.
const ExportObserver = exportObserver

const rowVersion = 1

func encodeRow(r CanonicalRow) []byte {
	b := []byte{rowVersion}
	b = appendString(b, r.Title)
	b = appendString(b, r.Canonical)
	b = binary.AppendUvarint(b, uint64(r.InboundCount))
	return binary.AppendUvarint(b, uint64(r.Rank))
}

func decodeRow(url string, b []byte) (CanonicalRow, error) {
	if len(b) == 0 || b[0] != rowVersion {
		return CanonicalRow{}, fmt.Errorf("%w: row of %s has unknown version", ErrCorrupt, url)
	}
	d := newDecoder(b[1:])
	r := CanonicalRow{URL: url, Title: d.String(), Canonical: d.String(), InboundCount: int64(d.Uvarint()), Rank: int64(d.Uvarint())}
	if d.Err() != nil || d.Len() != 0 || r.InboundCount < 0 || r.Rank < 0 {
		return CanonicalRow{}, fmt.Errorf("%w: row of %s of %d bytes is truncated or has trailing bytes", ErrCorrupt, url, len(b))
	}
	return r, nil
}

// updateRows writes the row of every member of the cluster whose view v
// is, where it changed: canonical, inbound count, rank or title.
func (ix *Index) updateRows(ctx context.Context, tx *framework.Txn, v *view) error {
	if ix.knobs.noRows {
		return nil
	}
	got := v.cells
	var err error
	if got == nil {
		rows := make([][]byte, len(v.members))
		for i, m := range v.members {
			rows[i] = []byte(m)
		}
		if got, err = tx.GetRows(ctx, PagesTable, rows, []framework.Column{rowCol, summaryCol}); err != nil {
			return err
		}
	}
	for _, m := range v.members {
		cells := got[m]
		var s summary
		if b, ok := cells[summaryCol]; ok {
			if s, err = decodeSummary(b); err != nil {
				return fmt.Errorf("%s %s: %w", m, summaryCol, err)
			}
		} else if s, err = readSummary(ctx, tx, m); err != nil { // a store from before summaries
			return err
		}
		want := encodeRow(CanonicalRow{Title: s.Title, Canonical: v.canonical, InboundCount: v.inbound, Rank: v.ranks[m]})
		if have, ok := cells[rowCol]; ok && bytes.Equal(have, want) {
			continue
		}
		if err := tx.Set(PagesTable, []byte(m), rowCol, want); err != nil {
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
	b, found, err := tx.Lookup(ctx, PagesTable, []byte(url), rowCol)
	if err != nil || !found {
		return err
	}
	if cur == nil {
		return tx.Delete(PagesTable, []byte(url), rowCol)
	}
	r, err := decodeRow(url, b)
	if err != nil {
		return err
	}
	if t := listTitle(cur.Title); r.Title != t {
		r.Title = t
		return tx.Set(PagesTable, []byte(url), rowCol, encodeRow(r))
	}
	return nil
}

// observeRow is the export observer: it exports the page's row as it is
// now, or its deletion.
func (ix *Index) observeRow(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	q := ix.opts.Export
	b, found, err := tx.Lookup(ctx, PagesTable, row, rowCol)
	if err != nil {
		return err
	}
	if !found {
		return q.Delete(tx, row)
	}
	r, err := decodeRow(string(row), b)
	if err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return q.Add(tx, row, v)
}

// DecodeExported reads an entry of the index's export queue: the page's
// row, or deleted when the page was deleted.
func DecodeExported(e export.Entry) (row CanonicalRow, deleted bool, err error) {
	if e.Delete {
		return CanonicalRow{URL: string(e.Key)}, true, nil
	}
	if err := json.Unmarshal(e.Value, &row); err != nil {
		return CanonicalRow{}, false, fmt.Errorf("webindex: exported row of %s: %w", e.Key, err)
	}
	if row.URL != string(e.Key) {
		return CanonicalRow{}, false, fmt.Errorf("%w: exported row of %s names %s", ErrCorrupt, e.Key, row.URL)
	}
	return row, false, nil
}

// CanonicalTable is the canonical table of a from-scratch computation:
// what a consumer of the index's export holds once the index is up to
// date.
func CanonicalTable(want *batch.Index) map[string]CanonicalRow {
	out := make(map[string]CanonicalRow, want.Len())
	for _, u := range want.URLs() {
		p, _ := want.Page(u)
		out[u] = CanonicalRow{URL: u, Title: listTitle(p.Title), Canonical: p.Canonical, InboundCount: p.InboundCount, Rank: p.Rank}
	}
	return out
}

// ReadExported rebuilds the canonical table from the stream a
// JetStreamSink filled with the index's export (opts.Queue: the queue's
// name), keeping per URL the entry with the highest sequence number, as
// a consumer of the export must: once the index is up to date and every
// entry exported, it is CanonicalTable of the loaded pages. It returns
// the table and how many messages it read.
func ReadExported(ctx context.Context, nc *nats.Conn, opts export.ConsumeOptions) (map[string]CanonicalRow, int, error) {
	t := export.NewTable()
	n, err := export.Consume(ctx, nc, opts, func(_ string, e export.Entry) error {
		if _, _, err := DecodeExported(e); err != nil {
			return err
		}
		t.Apply(e)
		return nil
	})
	if err != nil {
		return nil, n, err
	}
	out := map[string]CanonicalRow{}
	for k, v := range t.Values() {
		r, _, err := DecodeExported(export.Entry{Key: []byte(k), Value: v})
		if err != nil {
			return nil, n, err
		}
		out[k] = r
	}
	return out, n, nil
}
