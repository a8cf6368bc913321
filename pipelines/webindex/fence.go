package webindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// The fence of a bulk load (see the package documentation, "Bulk
// loading") lives in one row of its own table, which the import never
// writes: its state, and the pages written while it was up.
var (
	fenceRow = []byte("fence")
	// fenceState is the fence itself (an encoded fence). Every write
	// recorded under the fence also writes it, so that such a write and
	// the transaction that closes the fence cannot both commit.
	fenceState = framework.Column{Family: "fence", Qualifier: "state"}
	// pendingFamily holds the pages written while the fence was up:
	// qualifier = URL, value = an encoded pending change.
	pendingFamily = "pending"
)

// Phases of a fence.
const (
	// phaseImporting: the import may be under way; pages written now are
	// recorded under the fence, and the page observer leaves them alone.
	phaseImporting = 1
	// phaseClosing: the import is complete; pages are written as usual,
	// and those recorded under the fence are being moved into the index.
	phaseClosing = 2
)

// fence is the state of a bulk load.
type fence struct {
	phase byte
	// startTs and commitTs are the timestamps of the import.
	startTs, commitTs uint64
	// attempt counts the runs that took the load over (Resume), so that a
	// run taken over notices.
	attempt uint64
	// active is the first snapshot timestamp whose page writes go through
	// the fence (see PageWriter): notActive until the bulk load activates
	// it, 0 for a fence from before activation existed.
	active uint64
}

// notActive is the active timestamp of a fence not activated yet.
const notActive = math.MaxUint64

// Versions of an encoded fence: 1 has no active timestamp (the fence is
// active from the start), 2 ends with it.
const (
	fenceVersionAlwaysActive = 1
	fenceVersion             = 2
)

func encodeFence(f *fence) []byte {
	b := []byte{fenceVersion, f.phase}
	b = binary.AppendUvarint(b, f.startTs)
	b = binary.AppendUvarint(b, f.commitTs)
	b = binary.AppendUvarint(b, f.attempt)
	return binary.AppendUvarint(b, f.active)
}

func decodeFence(b []byte) (*fence, error) {
	if len(b) < 2 || (b[0] != fenceVersion && b[0] != fenceVersionAlwaysActive) || (b[1] != phaseImporting && b[1] != phaseClosing) {
		return nil, fmt.Errorf("%w: bulk load fence of %d bytes has an unknown version or phase", schema.ErrCorrupt, len(b))
	}
	d := schema.NewDecoder(b[2:])
	f := &fence{phase: b[1], startTs: d.Uvarint(), commitTs: d.Uvarint(), attempt: d.Uvarint()}
	if b[0] == fenceVersion {
		f.active = d.Uvarint()
	}
	if d.Err() != nil || d.Len() != 0 {
		return nil, fmt.Errorf("%w: bulk load fence of %d bytes is truncated or has trailing bytes", schema.ErrCorrupt, len(b))
	}
	return f, nil
}

// readFence returns the fence in tx's snapshot, or nil.
func readFence(ctx context.Context, tx *framework.Txn) (*fence, error) {
	b, ok, err := tx.Lookup(ctx, schema.FenceTable, fenceRow, fenceState)
	if err != nil || !ok {
		return nil, err
	}
	return decodeFence(b)
}

// Pending changes, the first byte of a pending cell.
const (
	pendingPut    = 'p' // followed by the encoded document
	pendingDelete = 'd'
	// pendingRenotify: the stored document was written by a transaction
	// that started before the fence and was left unindexed by the page
	// observer; closing the fence writes it again so that it is indexed.
	pendingRenotify = 'n'
)

func pendingCol(url string) framework.Column {
	return framework.Column{Family: pendingFamily, Qualifier: url}
}

// record notes a change of url under the fence f, in tx: the change
// (replacing any recorded before) and a rewrite of the fence, which makes
// tx conflict with the transaction that closes it.
func record(tx *framework.Txn, f *fence, url string, change []byte) error {
	if err := tx.Set(schema.FenceTable, fenceRow, pendingCol(url), change); err != nil {
		return err
	}
	return tx.Set(schema.FenceTable, fenceRow, fenceState, encodeFence(f))
}

// putFenced is PutPage while an import is under way: the page is recorded
// under the fence, not written where the observers would see it.
func putFenced(ctx context.Context, tx *framework.Txn, f *fence, p *extract.Page) (Change, error) {
	enc := schema.EncodeDoc(p)
	cur, err := fencedDoc(ctx, tx, p.URL)
	if err != nil {
		return Unchanged, err
	}
	change := Replaced
	switch {
	case cur == nil:
		change = Added
	case string(cur) == string(enc):
		return Unchanged, nil
	}
	return change, record(tx, f, p.URL, append([]byte{pendingPut}, enc...))
}

// deleteFenced is DeletePage while an import is under way. The deletion
// is recorded even if no document is visible: the import may not have
// written it yet.
func deleteFenced(ctx context.Context, tx *framework.Txn, f *fence, url string) (Change, error) {
	v, ok, err := tx.Lookup(ctx, schema.FenceTable, fenceRow, pendingCol(url))
	if err != nil || (ok && len(v) == 1 && v[0] == pendingDelete) {
		return Unchanged, err
	}
	cur, err := fencedDoc(ctx, tx, url)
	if err != nil {
		return Unchanged, err
	}
	change := Deleted
	if cur == nil {
		change = Unchanged
	}
	return change, record(tx, f, url, []byte{pendingDelete})
}

// fencedDoc returns the document of url as the writers see it during an
// import: the one recorded under the fence, else the stored one (which
// may not be visible yet if the import has not written it).
func fencedDoc(ctx context.Context, tx *framework.Txn, url string) ([]byte, error) {
	v, ok, err := tx.Lookup(ctx, schema.FenceTable, fenceRow, pendingCol(url))
	if err != nil {
		return nil, err
	}
	if ok {
		switch {
		case len(v) > 0 && v[0] == pendingPut:
			return v[1:], nil
		case len(v) == 1 && v[0] == pendingDelete:
			return nil, nil
		case len(v) == 1 && v[0] == pendingRenotify:
		default:
			return nil, fmt.Errorf("%w: change of %s recorded under the bulk load fence", schema.ErrCorrupt, url)
		}
	}
	v, ok, err = tx.Lookup(ctx, schema.PagesTable, []byte(url), schema.Doc)
	if err != nil || !ok {
		return nil, err
	}
	return v, nil
}

// settle writes the change recorded for url under the fence, if any, where
// the observers see it, and removes the record. It always writes the
// document (or its deletion), even if equal to the stored one, so that the
// page observer runs on it.
func settle(ctx context.Context, tx *framework.Txn, url string) error {
	v, ok, err := tx.Lookup(ctx, schema.FenceTable, fenceRow, pendingCol(url))
	if err != nil || !ok {
		return err
	}
	return settleValue(ctx, tx, url, v)
}

func settleValue(ctx context.Context, tx *framework.Txn, url string, v []byte) error {
	row := []byte(url)
	switch {
	case len(v) > 0 && v[0] == pendingPut:
		p, err := schema.DecodeDoc(v[1:])
		if err != nil {
			return fmt.Errorf("change of %s recorded under the bulk load fence: %w", url, err)
		}
		if err := tx.Set(schema.PagesTable, row, schema.Doc, v[1:]); err != nil {
			return err
		}
		if err := schema.SetListCells(tx, p); err != nil {
			return err
		}
	case len(v) == 1 && v[0] == pendingDelete:
		if err := tx.Delete(schema.PagesTable, row, schema.Doc); err != nil {
			return err
		}
		if err := schema.DeleteListCells(tx, url); err != nil {
			return err
		}
	case len(v) == 1 && v[0] == pendingRenotify:
		doc, ok, err := tx.Lookup(ctx, schema.PagesTable, row, schema.Doc)
		switch {
		case err != nil:
			return err
		case ok:
			err = tx.Set(schema.PagesTable, row, schema.Doc, doc)
		default:
			err = tx.Delete(schema.PagesTable, row, schema.Doc)
		}
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: change of %s recorded under the bulk load fence", schema.ErrCorrupt, url)
	}
	return tx.Delete(schema.FenceTable, fenceRow, pendingCol(url))
}

// deferPage is the page observer's run while an import is under way: the
// page was written by a transaction that started before the fence went
// up. Indexing it now would count it before (or twice with) the imported
// index, so it is recorded under the fence to be indexed when the fence
// closes.
func deferPage(ctx context.Context, tx *framework.Txn, f *fence, url string) error {
	_, ok, err := tx.Lookup(ctx, schema.FenceTable, fenceRow, pendingCol(url))
	if err != nil {
		return err
	}
	if ok { // any recorded change rewrites the page when the fence closes
		return tx.Set(schema.FenceTable, fenceRow, fenceState, encodeFence(f))
	}
	return record(tx, f, url, []byte{pendingRenotify})
}

// ErrBulkLoadInProgress is returned by BulkLoad when a bulk load's fence is
// up: another bulk load runs, or one stopped half way and must be resumed
// (BulkOptions.Resume) or given up (AbortBulkLoad).
var ErrBulkLoadInProgress = errors.New("webindex: a bulk load is in progress")

// closeFence ends the bulk load whose fence is f (attempt f.attempt):
// first the fence is set closing, so that from then on pages are written
// as usual; then the pages recorded under it are written where the
// observers see them, a batch per transaction; then it is removed. It
// returns how many recorded pages it moved.
func closeFence(ctx context.Context, db *framework.DB, attempt uint64) (int, error) {
	err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		f, err := ownFence(ctx, tx, attempt, "closing")
		switch {
		case err != nil:
			return err
		case f.phase == phaseClosing:
			return nil
		}
		f.phase = phaseClosing
		return tx.Set(schema.FenceTable, fenceRow, fenceState, encodeFence(f))
	})
	if err != nil {
		return 0, err
	}
	moved := 0
	for done := false; !done; {
		n := 0
		err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			n, done = 0, false
			for e, err := range tx.Scan(ctx, schema.RowScan(schema.FenceTable, string(fenceRow), pendingFamily)) {
				if err != nil {
					return err
				}
				if err := settleValue(ctx, tx, e.Column.Qualifier, e.Value); err != nil {
					return err
				}
				if n++; n == settleBatch {
					return nil
				}
			}
			done = true
			return tx.Delete(schema.FenceTable, fenceRow, fenceState)
		})
		if err != nil {
			return moved, fmt.Errorf("webindex: closing the bulk load fence: %w", err)
		}
		moved += n
	}
	return moved, nil
}

// ownFence returns the fence of the bulk load's run attempt in tx's
// snapshot: an error if it is gone, or another run took the load over.
// doing names what the run is doing, for the error.
func ownFence(ctx context.Context, tx *framework.Txn, attempt uint64, doing string) (*fence, error) {
	f, err := readFence(ctx, tx)
	switch {
	case err != nil:
		return nil, err
	case f == nil:
		return nil, fmt.Errorf("webindex: %s the bulk load fence: it is gone", doing)
	case f.attempt != attempt:
		return nil, fmt.Errorf("%w: the bulk load was taken over (attempt %d, this is %d)", ErrBulkLoadInProgress, f.attempt, attempt)
	}
	return f, nil
}

// settleBatch is how many pages recorded under a fence one transaction
// moves when the fence closes.
const settleBatch = 256
