package schema

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// MaxTitleBytes bounds the title of a search result or top-list entry: a
// page's title is cut to at most this many bytes, at a character boundary.
// A title is whatever a page's first <title> holds, so without the cut a
// list of thirty results could carry megabytes of titles. A page's own
// view (Page) reports its whole title.
const MaxTitleBytes = 256

// Summary is what a list shows of a page. It lives in its own small cell
// (SummaryCol), next to the document it is derived from, so that a list of
// n pages reads n small cells rather than n documents.
type Summary struct {
	// Title is the page's title cut by ListTitle.
	Title string
	// TextBytes is the length of the page's text in bytes.
	TextBytes int64
}

// Summarize derives the summary of a document.
func Summarize(p *extract.Page) Summary {
	return Summary{Title: ListTitle(p.Title), TextBytes: int64(len(p.Text))}
}

// ListTitle cuts title to at most MaxTitleBytes bytes without splitting a
// UTF-8 sequence.
func ListTitle(title string) string {
	if len(title) <= MaxTitleBytes {
		return title
	}
	n := MaxTitleBytes
	for n > 0 && !utf8.RuneStart(title[n]) {
		n--
	}
	return title[:n]
}

const summaryVersion = 1

func EncodeSummary(s Summary) []byte {
	b := []byte{summaryVersion}
	b = AppendString(b, s.Title)
	return binary.AppendUvarint(b, uint64(s.TextBytes))
}

func DecodeSummary(b []byte) (Summary, error) {
	if len(b) == 0 || b[0] != summaryVersion {
		return Summary{}, fmt.Errorf("%w: page summary has unknown version", ErrCorrupt)
	}
	d := NewDecoder(b[1:])
	s := Summary{Title: d.String(), TextBytes: int64(d.Uvarint())}
	if d.Err() != nil || d.Len() != 0 {
		return Summary{}, fmt.Errorf("%w: page summary of %d bytes is truncated or has trailing bytes", ErrCorrupt, len(b))
	}
	if len(s.Title) > MaxTitleBytes || s.TextBytes < 0 {
		return Summary{}, fmt.Errorf("%w: page summary has a title of %d bytes and %d bytes of text", ErrCorrupt, len(s.Title), s.TextBytes)
	}
	return s, nil
}

// ReadSummary returns the summary of the loaded page url; the zero summary
// if the page is not loaded (a list may name a canonical whose document was
// deleted before the observers caught up). A page stored before summaries
// existed has none: its summary is derived from its document, which costs
// a document read for that page until it is put again (PutPage writes the
// missing summary even when the document is unchanged).
func ReadSummary(ctx context.Context, tx *framework.Txn, url string) (Summary, error) {
	b, err := tx.Get(ctx, PagesTable, []byte(url), SummaryCol)
	if errors.Is(err, framework.ErrNotFound) {
		doc, err := ReadDoc(ctx, tx, url, Doc)
		if err != nil || doc == nil {
			return Summary{}, err
		}
		return Summarize(doc), nil
	}
	if err != nil {
		return Summary{}, err
	}
	s, err := DecodeSummary(b)
	if err != nil {
		return Summary{}, fmt.Errorf("%s %s: %w", url, SummaryCol, err)
	}
	return s, nil
}

// ExcerptBytes bounds the excerpt a page's snippets are made from: the
// first ExcerptBytes bytes of its text (cut at a character boundary). A
// search with snippets reads one excerpt per result, never a document, so
// a page of results costs at most its length times ExcerptBytes; a query
// term that first occurs beyond the excerpt is not shown in the snippet.
// Reranking by closeness reads the same excerpts (scoring.Excerpt).
const ExcerptBytes = scoring.ExcerptBytes

// ExcerptCol holds a page's excerpt, written and deleted with its summary.
var ExcerptCol = framework.Column{Family: "page", Qualifier: "excerpt"}

// excerpt is the excerpt of a text.
func excerpt(text string) string { return scoring.Excerpt(text) }

// SetListCells writes what lists show of p: its summary and excerpt.
func SetListCells(tx CellSetter, p *extract.Page) error {
	row := []byte(p.URL)
	if err := tx.Set(PagesTable, row, SummaryCol, EncodeSummary(Summarize(p))); err != nil {
		return err
	}
	return tx.Set(PagesTable, row, ExcerptCol, []byte(excerpt(p.Text)))
}

// DeleteListCells deletes what SetListCells writes.
func DeleteListCells(tx *framework.Txn, url string) error {
	if err := tx.Delete(PagesTable, []byte(url), SummaryCol); err != nil {
		return err
	}
	return tx.Delete(PagesTable, []byte(url), ExcerptCol)
}

// ReadExcerpt returns the excerpt of the loaded page url, "" if it is not
// loaded; a page stored before excerpts existed has its excerpt derived
// from its document (PutPage writes it on the next load).
func ReadExcerpt(ctx context.Context, tx *framework.Txn, url string) (string, error) {
	b, found, err := tx.Lookup(ctx, PagesTable, []byte(url), ExcerptCol)
	if err != nil || found {
		return string(b), err
	}
	doc, err := ReadDoc(ctx, tx, url, Doc)
	if err != nil || doc == nil {
		return "", err
	}
	return excerpt(doc.Text), nil
}
