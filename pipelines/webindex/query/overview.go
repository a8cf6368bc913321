package query

import (
	"context"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// Overview is what the index holds, as its statistics count it. The
// counts are folded from queued changes by weak observers, so right after
// a burst of loads they lag a little behind the pages.
type Overview struct {
	// Pages is the number of indexed pages; Links the distinct links out
	// of them (to loaded pages or not).
	Pages int64 `json:"pages"`
	Links int64 `json:"links"`
	// Clusters is the number of duplicate clusters (each listed once in
	// the top list); TextClusters those with text, which search covers.
	Clusters     int64 `json:"clusters"`
	TextClusters int64 `json:"text_clusters"`
	// Words is the number of words of the clusters' texts.
	Words int64 `json:"words"`
	// LastChange is when a page was last indexed (or the index bulk
	// loaded); zero if never.
	LastChange time.Time `json:"last_change"`
}

// Overview returns the index's statistics.
func (ix *Engine) Overview(ctx context.Context, db *framework.DB) (*Overview, error) {
	var o Overview
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		c, err := schema.ReadCorpus(ctx, tx)
		if err != nil {
			return err
		}
		o = Overview{Pages: c.Pages, Links: c.Links, Clusters: c.Clusters, TextClusters: c.Docs, Words: c.Words}
		if c.LastTs != 0 {
			o.LastChange = oracle.Physical(c.LastTs).UTC()
		}
		return nil
	})
	return &o, err
}
