package schema

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/trickle-dev/trickle/framework"
)

// Posting is a cluster's postings under one term: its frequency in the
// cluster's text and the number of sources whose anchors hold it.
type Posting struct {
	Key          string
	Body, Anchor int64
}

// TermPostings yields term's postings in cluster order: a merge of its
// text postings and its anchor postings.
func TermPostings(ctx context.Context, tx *framework.Txn, term string) iter.Seq2[Posting, error] {
	return func(yield func(Posting, error) bool) {
		type cursor struct {
			next  func() (framework.Entry, error, bool)
			key   string
			tf    int64
			valid bool
		}
		open := func(family string) (*cursor, func()) {
			next, stop := iter.Pull2(tx.Scan(ctx, RowScan(TermsTable, term, family)))
			return &cursor{next: next}, stop
		}
		advance := func(c *cursor) error {
			e, err, ok := c.next()
			if c.valid = ok && err == nil; !c.valid {
				return err
			}
			c.key = e.Column.Qualifier
			if c.tf, err = decodePosting(e.Value); err != nil {
				return fmt.Errorf("%s posting of %s under %q: %w", e.Column.Family, c.key, term, err)
			}
			return nil
		}
		body, stopBody := open(PostingFamily)
		defer stopBody()
		anchor, stopAnchor := open(AnchorFamily)
		defer stopAnchor()
		if err := errors.Join(advance(body), advance(anchor)); err != nil {
			yield(Posting{}, err)
			return
		}
		for body.valid || anchor.valid {
			var p Posting
			var err error
			switch {
			case body.valid && (!anchor.valid || body.key < anchor.key):
				p = Posting{Key: body.key, Body: body.tf}
				err = advance(body)
			case !body.valid || anchor.key < body.key:
				p = Posting{Key: anchor.key, Anchor: anchor.tf}
				err = advance(anchor)
			default:
				p = Posting{Key: body.key, Body: body.tf, Anchor: anchor.tf}
				err = errors.Join(advance(body), advance(anchor))
			}
			if !yield(p, nil) {
				return
			}
			if err != nil {
				yield(Posting{}, err)
				return
			}
		}
	}
}
