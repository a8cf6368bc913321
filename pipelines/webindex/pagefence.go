package webindex

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// A page write must go through the bulk load fence whenever one is up
// (see "Bulk loading" in the package documentation): a write that
// skipped it while a bulk load ran would be found by the import (which
// then gives up), or be written over, when the fence closes, by an older
// change recorded under it. Reading the fence cell in every page write
// costs a read per page for a fence that is almost never up, so a
// PageWriter reads it only once per fenceLease of snapshot time, and the
// fence is not obeyed by page writes as soon as it is up, but from its
// active timestamp on:
//
//  1. A PageWriter that read no fence in the snapshot of a transaction
//     at T writes pages without reading it in transactions whose
//     snapshot S is in [T, T+fenceLease). Any other transaction reads
//     the fence in its own snapshot (and, seeing none, moves T to S).
//  2. A bulk load puts its fence up (commit timestamp F) not active;
//     then a second transaction, whose snapshot A is after F, makes it
//     active from A+fenceLease; the load waits for the oracle to pass
//     that before it lets page writes in (its afterFence point) and
//     before it imports.
//  3. A page write whose snapshot S sees a fence goes through it only
//     if S is at or after the fence's active timestamp; otherwise it
//     writes as if there were no fence.
//
// A write that skips the read (1) read no fence at T, so any fence in
// its snapshot committed at F > T, and is active from A+fenceLease >
// F+fenceLease > T+fenceLease > S: had the write read it, rule 3 would
// have had it write as if there were no fence. Skipping therefore
// changes nothing: every write acts exactly as one that read the fence.
// No clock is involved, only the oracle's timestamps, so the argument
// holds across processes, paused ones included.
//
// Writes whose snapshot precedes the active timestamp are what the
// protocol already handled for a transaction that started before the
// fence: one that commits before the import's first write makes the load
// give up (ErrNotEmpty, the page is indexed as usual); one that commits
// later is left alone by the page observer, which always reads the
// fence, and indexed when the fence closes. A change recorded under the
// fence is recorded by a write whose snapshot is after the active
// timestamp, so after such a write started: the two are concurrent,
// neither saw the other, and either outcome is one of their orders.
const fenceLease = 250 * time.Millisecond

// fenceLeaseTs is fenceLease in timestamp units.
const fenceLeaseTs = uint64(fenceLease/time.Millisecond) << oracle.LogicalBits

// PageWriter writes pages as PutPage and DeletePage do, but reads the
// bulk load fence only while a bulk load may be under way: once per 250ms
// of snapshot time otherwise, where PutPage reads it for every page. That
// is what a process that writes many pages (the loader) uses. A
// PageWriter is safe for concurrent use; it serves the transactions of
// one DB (it compares their timestamps). The zero value is ready to use.
type PageWriter struct {
	// clear is a snapshot timestamp in which no fence was up (0: none
	// known).
	clear atomic.Uint64
}

// PutPage is webindex.PutPage, reading the fence only when needed.
func (w *PageWriter) PutPage(ctx context.Context, tx *framework.Txn, p *extract.Page) (Change, error) {
	return putPage(ctx, tx, w, p)
}

// DeletePage is webindex.DeletePage, reading the fence only when needed.
func (w *PageWriter) DeletePage(ctx context.Context, tx *framework.Txn, url string) (Change, error) {
	return deletePage(ctx, tx, w, url)
}

// PutCanonical is PutPage for a page whose URL u the caller normalized
// already (extract.NormalizeURL, then extract.ParseCanonical): it is not
// normalized again, only checked to be the page's (p.URL == u.String()).
func (w *PageWriter) PutCanonical(ctx context.Context, tx *framework.Txn, u extract.CanonicalURL, p *extract.Page) (Change, error) {
	switch {
	case u.IsZero():
		return Unchanged, fmt.Errorf("webindex: PutCanonical: %w: the zero CanonicalURL", extract.ErrBadURL)
	case p == nil:
		return Unchanged, fmt.Errorf("webindex: PutCanonical: no page for %s", u)
	case p.URL != u.String():
		return Unchanged, fmt.Errorf("webindex: PutCanonical: page URL %q is not %s", p.URL, u)
	}
	return putNormalized(ctx, tx, w, p)
}

// DeleteCanonical is DeletePage of a URL the caller normalized already
// (extract.NormalizeURL), which is not normalized again.
func (w *PageWriter) DeleteCanonical(ctx context.Context, tx *framework.Txn, u extract.CanonicalURL) (Change, error) {
	if u.IsZero() {
		return Unchanged, fmt.Errorf("webindex: DeleteCanonical: %w: the zero CanonicalURL", extract.ErrBadURL)
	}
	return deleteNormalized(ctx, tx, w, u.String())
}

// pageFence returns the fence a page write in tx goes through: nil when
// none is up in tx's snapshot or the one up is not active for it. w may
// be nil: then the fence is always read.
func (w *PageWriter) pageFence(ctx context.Context, tx *framework.Txn) (*fence, error) {
	s := tx.StartTs()
	if w != nil && s != 0 {
		if t := w.clear.Load(); t != 0 && t <= s && s-t < fenceLeaseTs {
			return nil, nil
		}
	}
	f, err := readFence(ctx, tx)
	switch {
	case err != nil:
		return nil, err
	case f == nil:
		if w != nil && s != 0 {
			for t := w.clear.Load(); t < s && !w.clear.CompareAndSwap(t, s); t = w.clear.Load() {
			}
		}
		return nil, nil
	case s < f.active:
		return nil, nil
	}
	return f, nil
}

// activateFence makes the fence of attempt active from a fenceLease after
// a snapshot taken now (or leaves the active timestamp it has), then
// waits until the oracle hands out timestamps past it: from then on,
// every page write that starts goes through the fence.
func activateFence(ctx context.Context, db *framework.DB, attempt uint64) error {
	var active uint64
	err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		f, err := ownFence(ctx, tx, attempt, "activating")
		switch {
		case err != nil:
			return err
		case f.active != notActive:
			active = f.active
			return nil
		}
		f.active = tx.StartTs() + fenceLeaseTs
		active = f.active
		return tx.Set(schema.FenceTable, fenceRow, fenceState, encodeFence(f))
	})
	if err != nil {
		return err
	}
	for {
		var now uint64
		if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
			now = tx.StartTs()
			return nil
		}); err != nil {
			return err
		}
		if now == 0 {
			return fmt.Errorf("webindex: activating the bulk load fence: no timestamp from the oracle")
		}
		if now >= active {
			return nil
		}
		wait := time.Duration(oracle.PhysicalMillis(active)-oracle.PhysicalMillis(now)+1) * time.Millisecond
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(wait):
		}
	}
}
