package webindex

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// A page observer that changes a target's inlinks cannot notify the
// target's cluster itself: the target's own page observer may move it to
// another cluster concurrently, and under snapshot isolation neither would
// see the other. A run that starts after the change committed can: either
// it sees the move, or the move commits after it began and notifies the
// new cluster, whose recompute then sees the change. That run is the
// relay. It used to be a run per target (pages/page:inlinks-changed, one
// weak notification on each target's row): some four per page loaded, 60 %
// of an index's observer transactions. Now a page observer's run records
// the targets it changed in a cell of its own row and notifies the row
// once; one relay run reads the targets' clusters with one read and
// notifies them all.
var (
	// outlinksChanged is weakly notified on a page's row when its runs
	// changed the inlinks of other URLs; its observer relays the changes
	// to their clusters.
	outlinksChanged = framework.Column{Family: "page", Qualifier: "outlinks-changed"}
	// relayCell holds, on a page's row, the URLs whose inlinks runs of its
	// page observer changed, until relayed. One cell, which a run adds
	// to and the relay deletes, so that both read it with the reads they
	// make anyway (the cells of its row a run reads every time come with
	// its first read); a run and a relay of the same row that overlap
	// conflict on it, and one of them runs again.
	relayCell = framework.Column{Family: "page", Qualifier: "relay"}
)

// queueRelay records in tx that the page url changed the inlinks of
// targets, for its relay to forward to their clusters: with the targets
// of its earlier runs not relayed yet.
func queueRelay(ctx context.Context, tx *framework.Txn, url string, targets []string) error {
	if len(targets) == 0 {
		return nil
	}
	queued, err := relayTargets(ctx, tx, url)
	if err != nil {
		return err
	}
	for _, t := range targets {
		queued[t] = true
	}
	all := slices.Sorted(maps.Keys(queued))
	b := binary.AppendUvarint(nil, uint64(len(all)))
	for _, t := range all {
		b = schema.AppendString(b, t)
	}
	if err := tx.Set(schema.PagesTable, []byte(url), relayCell, b); err != nil {
		return err
	}
	return tx.NotifyWeak(schema.PagesTable, []byte(url), outlinksChanged)
}

// relayTargets reads the targets queued for url's relay.
func relayTargets(ctx context.Context, tx *framework.Txn, url string) (map[string]bool, error) {
	out := map[string]bool{}
	b, found, err := tx.Lookup(ctx, schema.PagesTable, []byte(url), relayCell)
	if err != nil || !found {
		return out, err
	}
	d := schema.NewDecoder(b)
	ts := d.Strings()
	if d.Err() != nil || d.Len() != 0 {
		return nil, fmt.Errorf("%w: %s %s of %d bytes is malformed", schema.ErrCorrupt, url, relayCell, len(b))
	}
	for _, t := range ts {
		out[t] = true
	}
	return out, nil
}

// observeOutlinks relays a page's inlink changes to the clusters of their
// targets: it notifies the cluster of each target that has one, nothing
// for a target loaded and not indexed yet, and the rows of the URLs not
// loaded whose queued deltas are due to be folded, which their observer
// does. It then deletes the relayed targets.
func (ix *Index) observeOutlinks(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	queued, err := relayTargets(ctx, tx, string(row))
	if err != nil || len(queued) == 0 {
		return err
	}
	var targets [][]byte
	for _, t := range slices.Sorted(maps.Keys(queued)) {
		targets = append(targets, []byte(t))
	}
	got, err := tx.GetRows(ctx, schema.PagesTable, targets, []framework.Column{schema.ClusterOf, schema.SummaryCol})
	if err != nil {
		return err
	}
	notified := map[string]bool{}
	for _, t := range targets {
		key, ok := got[string(t)][schema.ClusterOf]
		_, loaded := got[string(t)][schema.SummaryCol]
		switch {
		case !ok && loaded:
			// Loaded and not indexed yet: its page observer's run
			// commits after this one began, puts it in a cluster and
			// notifies the cluster, whose recompute counts the change.
			continue
		case !ok:
			// Not loaded: nothing counts its inlinks until it is, and
			// its queued deltas need folding only once there are FoldAt
			// of them, which a read of at most that many tells.
			var long bool
			if long, err = queueAtLeast(ctx, tx, t, schema.FoldAt); err == nil && long {
				err = tx.NotifyWeak(schema.PagesTable, t, schema.TargetDirty)
			}
		case notified[string(key)]:
			continue
		default:
			notified[string(key)] = true
			err = tx.NotifyWeak(schema.ClustersTable, key, schema.ClusterDirty)
		}
		if err != nil {
			return err
		}
	}
	return tx.Delete(schema.PagesTable, row, relayCell)
}

// queueAtLeast reports whether url's row holds at least n queued inlink
// deltas, reading no more than n of them.
func queueAtLeast(ctx context.Context, tx *framework.Txn, url []byte, n int) (bool, error) {
	seen := 0
	for _, err := range tx.Scan(ctx, schema.RowScan(schema.PagesTable, string(url), schema.InlinkDeltaFamily)) {
		if err != nil {
			return false, err
		}
		if seen++; seen >= n {
			return true, nil
		}
	}
	return false, nil
}
