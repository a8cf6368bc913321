package schema

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// Tables. Every row key is a normalized URL, a cluster key, a term or a
// top-list position; see the package documentation for what lives where.
const (
	// PagesTable holds one row per URL: the loaded document, the state the
	// page observer last indexed, and the URL's inlinks.
	PagesTable = "pages"
	// ClustersTable holds one row per duplicate cluster (the paper's dups
	// table): its members and its derived state.
	ClustersTable = "clusters"
	// TermsTable is the inverted index: one row per term, one column per
	// cluster whose text contains it.
	TermsTable = "terms"
	// TopTable orders canonicals by inbound count: its row keys sort by
	// count descending, then URL.
	TopTable = "top"
	// FenceTable holds the fence of a bulk load and the pages written
	// while it is up (see webindex.Index.BulkLoad); it is empty otherwise.
	FenceTable = "bulkload"
)

// Families and columns.
var (
	// Doc is a page's loaded document (an encoded extract.Page). The loader
	// writes it; writing it triggers the page observer.
	Doc = framework.Column{Family: "page", Qualifier: "doc"}
	// SummaryCol is what lists show of a page (an encoded summary): written
	// and deleted with Doc in the same transaction, so that search results
	// and top lists never read a document, however large.
	SummaryCol = framework.Column{Family: "page", Qualifier: "summary"}
	// Indexed is the document the page observer last indexed: the diff
	// between it and Doc is what an observer run changes.
	Indexed = framework.Column{Family: "page", Qualifier: "indexed"}
	// ClusterOf is the key of the cluster the page observer last put the
	// page in; it changes in the same transaction as the membership.
	ClusterOf = framework.Column{Family: "page", Qualifier: "cluster"}
	// InlinkFamily holds a URL's inlinks: qualifier = source URL, value =
	// anchor text. Each source writes only its own cells, so a popular
	// target's inlinks never collide.
	InlinkFamily = "in"
	// InlinkCountCol is the number of a URL's inlink cells, folded from
	// queued deltas (InlinkDeltaFamily) when its inlinks observer runs, so
	// that a popular page's count is a value to read, not cells to scan.
	InlinkCountCol = framework.Column{Family: "page", Qualifier: "inlinks"}
	// InlinkDeltaFamily queues +1/-1 changes of InlinkCountCol, one cell per
	// change (qualifier: writer's start timestamp and source), written with
	// the inlink cell itself; distinct cells, so they never collide.
	InlinkDeltaFamily = "in.q"
	// TargetDirty is weakly notified on the row of a URL not loaded when
	// its inlinks change (by the relay: the web index's relay.go); its observer folds the
	// URL's queued deltas, or forwards the change to the URL's cluster if
	// it has one by then.
	TargetDirty = framework.Column{Family: "page", Qualifier: "inlinks-changed"}

	// MemberFamily lists a cluster's pages: qualifier = URL, empty value.
	MemberFamily = "member"
	// ClusterDirty is weakly notified whenever anything a cluster's derived
	// state depends on changes; its observer recomputes that state.
	ClusterDirty = framework.Column{Family: "cluster", Qualifier: "dirty"}
	// ClusterState is the cluster's derived state (an encoded state),
	// read by every search hit, so kept small.
	ClusterState = framework.Column{Family: "cluster", Qualifier: "state"}
	// ClusterTerms lists the search terms posted for the cluster (encoded
	// terms), as many as its text has distinct words: written when the
	// cluster is posted, read only to unpost them when it empties.
	ClusterTerms = framework.Column{Family: "cluster", Qualifier: "terms"}

	// PostingFamily holds a term's clusters: qualifier = cluster key.
	PostingFamily = "cluster"
	// TopEntry is the single column of a TopTable row.
	TopEntry = framework.Column{Family: "top", Qualifier: "entry"}
)

// ErrCorrupt is wrapped by errors decoding a stored value that this package
// did not write, so a damaged store is reported rather than indexed.
var ErrCorrupt = errors.New("webindex: corrupt stored value")

// Document encodings: docVersion 1 had no MoreAnchors.
const (
	docVersionOneAnchor = 1
	docVersion          = 2
)

// EncodeDoc serializes p compactly: a version byte, then URL, title, text,
// each link's target and anchor, and each of MoreAnchors' target and
// anchor, as uvarint-length-prefixed strings (each list after its length).
func EncodeDoc(p *extract.Page) []byte {
	n := 1 + 5*binary.MaxVarintLen64 + len(p.URL) + len(p.Title) + len(p.Text)
	for _, l := range p.Links {
		n += 2*binary.MaxVarintLen64 + len(l.Target) + len(l.Anchor)
	}
	for _, l := range p.MoreAnchors {
		n += 2*binary.MaxVarintLen64 + len(l.Target) + len(l.Anchor)
	}
	b := make([]byte, 0, n)
	b = append(b, docVersion)
	b = AppendString(b, p.URL)
	b = AppendString(b, p.Title)
	b = AppendString(b, p.Text)
	b = binary.AppendUvarint(b, uint64(len(p.Links)))
	for _, l := range p.Links {
		b = AppendString(b, l.Target)
		b = AppendString(b, l.Anchor)
	}
	b = binary.AppendUvarint(b, uint64(len(p.MoreAnchors)))
	for _, l := range p.MoreAnchors {
		b = AppendString(b, l.Target)
		b = AppendString(b, l.Anchor)
	}
	return b
}

// DecodeDoc is the inverse of EncodeDoc.
func DecodeDoc(b []byte) (*extract.Page, error) {
	if len(b) == 0 || (b[0] != docVersion && b[0] != docVersionOneAnchor) {
		return nil, fmt.Errorf("%w: document has unknown version", ErrCorrupt)
	}
	d := NewDecoder(b[1:])
	p := &extract.Page{URL: d.String(), Title: d.String(), Text: d.String()}
	p.Links = d.links()
	if b[0] == docVersion {
		p.MoreAnchors = d.links()
	}
	if d.Err() != nil || d.Len() != 0 {
		return nil, fmt.Errorf("%w: document of %d bytes is truncated or has trailing bytes", ErrCorrupt, len(b))
	}
	return p, nil
}

func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// links reads a uvarint count, then that many (target, anchor) pairs.
func (d *Decoder) links() []extract.Link {
	n := d.Uvarint()
	if n > uint64(d.Len()) { // every link takes at least two bytes
		d.Fail(fmt.Errorf("%w: document claims %d links in %d bytes", ErrCorrupt, n, d.Len()))
		return nil
	}
	var out []extract.Link
	if n > 0 {
		out = make([]extract.Link, n)
	}
	for i := range out {
		out[i] = extract.Link{Target: d.String(), Anchor: d.String()}
	}
	return out
}

// Anchors of an inlink cell (in:<source>): the value is the one anchor's
// text, as stores have always held it, unless the link has several
// anchors (or one starting with anchorsMark): then anchorsMark, a uvarint
// count and the anchors as uvarint-length-prefixed strings. anchorsMark
// (0xff) never starts UTF-8 text, so an old store's anchors read as
// before.
const anchorsMark = 0xff

// EncodeAnchors is the value of an inlink cell with anchors.
func EncodeAnchors(anchors []string) []byte {
	switch {
	case len(anchors) == 0:
		return []byte{}
	case len(anchors) == 1 && (anchors[0] == "" || anchors[0][0] != anchorsMark):
		return []byte(anchors[0])
	}
	b := binary.AppendUvarint([]byte{anchorsMark}, uint64(len(anchors)))
	for _, a := range anchors {
		b = AppendString(b, a)
	}
	return b
}

// DecodeAnchors is the inverse of EncodeAnchors.
func DecodeAnchors(b []byte) ([]string, error) {
	switch {
	case len(b) == 0:
		return nil, nil
	case b[0] != anchorsMark:
		return []string{string(b)}, nil
	}
	d := NewDecoder(b[1:])
	out := d.Strings()
	if d.Err() != nil || d.Len() != 0 || len(out) == 0 {
		return nil, fmt.Errorf("%w: anchors of %d bytes are malformed", ErrCorrupt, len(b))
	}
	return out, nil
}

// Strings reads a uvarint count, then that many strings.
func (d *Decoder) Strings() []string {
	n := d.Uvarint()
	if n > uint64(d.Len()) { // every string takes at least one byte
		d.Fail(fmt.Errorf("%w: %d strings in %d bytes", ErrCorrupt, n, d.Len()))
		return nil
	}
	var out []string
	if n > 0 {
		out = make([]string, 0, n)
	}
	for range n {
		out = append(out, d.String())
	}
	return out
}
