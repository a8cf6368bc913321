package schema

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
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

// RowCol is a page's row of the canonical table (an encoded CanonicalRow
// without its URL, the row key). The cluster observer writes it for each
// member whose row changed; the page observer keeps its title current
// and deletes it with the page. The export observer, when there is one,
// exports it whenever it changes: its runs for one URL write the URL's
// ack cell, so two of them conflict and the later one has the higher
// sequence number, as the export queue's consumers need.
var RowCol = framework.Column{Family: "page", Qualifier: "row"}

const rowVersion = 1

func EncodeRow(r CanonicalRow) []byte {
	b := []byte{rowVersion}
	b = AppendString(b, r.Title)
	b = AppendString(b, r.Canonical)
	b = binary.AppendUvarint(b, uint64(r.InboundCount))
	return binary.AppendUvarint(b, uint64(r.Rank))
}

func DecodeRow(url string, b []byte) (CanonicalRow, error) {
	if len(b) == 0 || b[0] != rowVersion {
		return CanonicalRow{}, fmt.Errorf("%w: row of %s has unknown version", ErrCorrupt, url)
	}
	d := NewDecoder(b[1:])
	r := CanonicalRow{URL: url, Title: d.String(), Canonical: d.String(), InboundCount: int64(d.Uvarint()), Rank: int64(d.Uvarint())}
	if d.Err() != nil || d.Len() != 0 || r.InboundCount < 0 || r.Rank < 0 {
		return CanonicalRow{}, fmt.Errorf("%w: row of %s of %d bytes is truncated or has trailing bytes", ErrCorrupt, url, len(b))
	}
	return r, nil
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
