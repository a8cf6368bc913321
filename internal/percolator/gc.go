package percolator

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/store"
)

// The safe point is kept in the store so that it survives restarts.

var (
	metaGCRow       = protocol.SafePoint.Row
	safePointColumn = protocol.SafePoint.Column
)

func loadSafePoint(ctx context.Context, st store.Store) (uint64, error) {
	sp, _, err := readSafePoint(ctx, st)
	return sp, err
}

// AdoptSafePoint reads the safe point the last collection persisted
// and moves this DB's up to it, returning the DB's safe point. Processes
// that do not collect call it from time to time: a transaction of theirs
// that a collection passed (its process had stopped reporting it, see
// OldestActive) then fails with ErrSnapshotTooOld at its next read instead
// of reading a snapshot the collection may have thinned.
func (db *DB) AdoptSafePoint(ctx context.Context) (uint64, error) {
	sp, err := loadSafePoint(ctx, db.st)
	if err != nil {
		return 0, err
	}
	db.active.adopt(sp)
	return db.active.safePoint.Load(), nil
}

// readSafePoint returns the persisted safe point (0 if none) and its
// stored value (nil if none).
func readSafePoint(ctx context.Context, st store.Store) (uint64, []byte, error) {
	cells, err := st.ReadRow(ctx, protocol.MetaTable, metaGCRow, []Column{safePointColumn}, []store.Span{{MaxTs: 0, MinTs: 0, Limit: 1}})
	if err != nil {
		return 0, nil, fmt.Errorf("framework: load safe point: %w", err)
	}
	if len(cells) == 0 {
		return 0, nil, nil
	}
	if len(cells[0].Value) != 8 {
		return 0, nil, fmt.Errorf("framework: load safe point: %w: %d-byte value", protocol.ErrCorrupt, len(cells[0].Value))
	}
	return binary.BigEndian.Uint64(cells[0].Value), cells[0].Value, nil
}

// saveSafePoint persists sp unless a higher safe point is already
// persisted, and returns the one that is. It never lowers the stored
// safe point: a collection that started earlier, or in another process,
// may have stored a higher one and deleted the versions below it, and
// readers that opened since trust the stored one. The write is
// conditional on the value it replaces (a compare-and-swap), so two
// collections racing end with the higher of their safe points.
func saveSafePoint(ctx context.Context, st store.Store, sp uint64) (uint64, error) {
	for {
		cur, raw, err := readSafePoint(ctx, st)
		if err != nil {
			return 0, err
		}
		if cur >= sp && raw != nil {
			return cur, nil
		}
		check := store.Check{Column: safePointColumn, MinTs: 0, MaxTs: 0, Expect: store.MustBeAbsent}
		if raw != nil {
			check.Expect, check.ValuePrefix = store.MustExist, raw
		}
		res, err := st.Apply(ctx, &store.RowTxn{
			Table: protocol.MetaTable, Row: metaGCRow,
			Checks:    []store.Check{check},
			Mutations: []store.Mutation{{Column: safePointColumn, Ts: 0, Value: binary.BigEndian.AppendUint64(nil, sp)}},
		})
		if err != nil {
			return 0, err
		}
		if res.Applied {
			return sp, nil
		}
		// Someone stored another safe point meanwhile: look again.
	}
}

// GCStats reports what a garbage collection did.
type GCStats = engine.GCStats

// compactShare sets when a collection compacts a table: when it removed
// at least 1/compactShare of the versions it examined there. Until a
// compaction meets them, the removed versions stay below their
// tombstones, and a read of the table steps over both: a collection that
// leaves a table's dead queue entries as tombstones saves its readers
// nothing. A table it barely touched (an inverted index, whose postings
// rarely change) is left to the store's own compactions, which cost
// nothing extra.
const compactShare = 8

// notificationPending reports whether k has a notification waiting for its
// observer. (Only a strong observer tells a change by the cell's write
// records; a weak one runs on every notification.)
func (db *DB) notificationPending(ctx context.Context, k protocol.Key) (bool, error) {
	cells, err := db.st.ReadRow(ctx, k.Table, k.Row, []Column{protocol.NotifyColumn(k.Column)}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
	if err != nil {
		return false, fmt.Errorf("%s: reading its notifications: %w", k, err)
	}
	return len(cells) > 0, nil
}

// GC removes versions that no snapshot at or above the safe point can read.
// The safe point is upTo (0 means a fresh timestamp), lowered to the oldest
// transaction still running in this DB and never moved backwards. It is
// persisted before anything is deleted; from then on transactions that
// started below it fail with ErrSnapshotTooOld. Locks below it are resolved
// first, in every table, before anything is deleted: their transactions
// cannot still be running, so they are rolled back unless their primary
// committed, which only the primary's records, still whole, can tell.
//
// Only this DB's running transactions hold the safe point back; processes
// sharing the store must agree on it before collecting.
func (db *DB) GC(ctx context.Context, upTo uint64) (GCStats, error) {
	if upTo == 0 {
		ts, err := db.or.Timestamp(ctx)
		if err != nil {
			return GCStats{}, fmt.Errorf("framework: gc: %w", err)
		}
		upTo = ts
	}
	sp := db.active.raise(upTo)
	stored, err := saveSafePoint(ctx, db.st, sp)
	if err != nil {
		return GCStats{}, fmt.Errorf("framework: gc: save safe point: %w", err)
	}
	if stored > sp {
		// A collection elsewhere got further: transactions below its
		// safe point may read collected snapshots, so they fail here too.
		// This collection deletes only what its own safe point allows.
		db.active.adopt(stored)
	}
	stats := GCStats{SafePoint: sp}
	// Which columns have strong observers anywhere in the deployment: a
	// deletion of one keeps its record while its notification is pending.
	ps, err := published.Load(ctx, db.st)
	if err != nil {
		return stats, fmt.Errorf("framework: gc: %w", err)
	}
	observed := published.Union(db.opts.Observed, ps)
	tables, err := db.st.Tables(ctx, store.DefaultGroup)
	if err != nil {
		return stats, fmt.Errorf("framework: gc: %w", err)
	}
	tables = slices.DeleteFunc(tables, func(t string) bool { return strings.HasPrefix(t, protocol.ReservedPrefix) })
	// Every lock below the safe point is resolved before anything is
	// deleted, in every table: a secondary lock's fate is read from its
	// primary's records, which may be in a row collected before it (an
	// old commit record, removed once a newer write covers it). Resolved
	// after that, a committed transaction's secondary would be rolled
	// back.
	for _, t := range tables {
		if err := db.resolveLocksBelow(ctx, t, sp, &stats); err != nil {
			return stats, fmt.Errorf("framework: gc %s: %w", t, err)
		}
	}
	for _, t := range tables {
		deleted := stats.Deleted
		versions, err := db.gcTable(ctx, t, sp, observed, &stats)
		if err != nil {
			return stats, fmt.Errorf("framework: gc %s: %w", t, err)
		}
		if deleted = stats.Deleted - deleted; deleted == 0 || deleted*compactShare < versions {
			continue
		}
		c, ok := db.st.(store.TableCompacter)
		if !ok {
			continue
		}
		switch err := c.CompactTable(ctx, store.DefaultGroup, t); {
		case errors.Is(err, errors.ErrUnsupported):
			// A store reached through one that forwards: not here.
		case err != nil:
			return stats, fmt.Errorf("framework: gc %s: %w", t, err)
		default:
			stats.Compacted = append(stats.Compacted, t)
		}
	}
	return stats, nil
}

// resolveLocksBelow resolves every lock of table whose transaction
// started below the safe point sp: such a transaction is no longer
// running (see GC), so it is rolled forward if its primary committed and
// back if not.
func (db *DB) resolveLocksBelow(ctx context.Context, table string, sp uint64, stats *GCStats) error {
	for c, err := range db.st.Scan(ctx, store.ScanRequest{Table: table, Spans: protocol.LockSpans()}) {
		if err != nil {
			return err
		}
		l, err := protocol.DecodeLock(c.Value)
		if err != nil {
			return fmt.Errorf("%s/%q %s: %w", table, c.Row, c.Column, err)
		}
		if l.StartTs >= sp {
			continue
		}
		var waits int
		k := protocol.Key{Table: table, Row: c.Row, Column: c.Column}
		if err := db.resolve(ctx, k, l.StartTs, l, true, &waits); err != nil {
			return err
		}
		stats.LocksResolved++
	}
	return nil
}

// gcTable collects one table and returns how many versions it examined.
func (db *DB) gcTable(ctx context.Context, table string, sp uint64, observed ObservedSet, stats *GCStats) (versions int, err error) {
	var (
		row   []byte
		muts  []store.Mutation
		group []store.Cell
	)
	flushRow := func() error {
		if len(muts) == 0 {
			return nil
		}
		_, err := db.st.Apply(ctx, &store.RowTxn{Table: table, Row: row, Mutations: muts, NoSync: true})
		stats.Deleted += len(muts)
		muts = nil
		return err
	}
	flushColumn := func() error {
		if len(group) == 0 {
			return nil
		}
		stats.Columns++
		ds, err := db.gcColumn(ctx, protocol.Key{Table: table, Row: group[0].Row, Column: group[0].Column}, group, sp, observed, stats)
		group = group[:0]
		muts = append(muts, ds...)
		return err
	}
	for c, err := range db.st.Scan(ctx, store.ScanRequest{Table: table}) {
		if err != nil {
			return versions, err
		}
		if len(group) > 0 && (group[0].Column != c.Column || !bytes.Equal(group[0].Row, c.Row)) {
			if err := flushColumn(); err != nil {
				return versions, err
			}
		}
		if row != nil && !bytes.Equal(row, c.Row) {
			if err := flushRow(); err != nil {
				return versions, err
			}
		}
		row = c.Row
		versions++
		group = append(group, c)
	}
	if err := flushColumn(); err != nil {
		return versions, err
	}
	return versions, flushRow()
}

// gcColumn plans one column, resolving locks below the safe point first.
// A deletion of a column with a strong observer (in observed) whose
// notification is still pending keeps its delete record (see
// protocol.GCPlan.RemovesDeletion).
func (db *DB) gcColumn(ctx context.Context, k protocol.Key, cells []store.Cell, sp uint64, observed ObservedSet, stats *GCStats) ([]store.Mutation, error) {
	for {
		plan, err := protocol.PlanGC(cells, sp, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if plan.RemovesDeletion && len(plan.Locks) == 0 && strongly(observed, k) {
			pending, err := db.notificationPending(ctx, k)
			if err != nil {
				return nil, err
			}
			if pending {
				stats.DeletionsKept++
				if plan, err = protocol.PlanGC(cells, sp, true); err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
			}
		}
		if len(plan.Locks) == 0 {
			return plan.Deletions, nil
		}
		for i, ts := range plan.Locks {
			var waits int
			if err := db.resolve(ctx, k, ts, plan.LockRecs[i], true, &waits); err != nil {
				return nil, err
			}
			stats.LocksResolved++
		}
		if cells, err = db.st.ReadRow(ctx, k.Table, k.Row, []Column{k.Column}, []store.Span{store.AllVersions}); err != nil {
			return nil, err
		}
	}
}
