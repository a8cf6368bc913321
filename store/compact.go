package store

import (
	"context"
	"fmt"

	"github.com/trickle-dev/trickle/internal/keys"
)

// CompactGroup compacts one locality group's key range. Removed cells
// leave tombstones that scans must step over until compaction drops them;
// a group whose cells are written and deleted all the time (a queue of
// work, such as the transaction framework's notifications) piles them up,
// and its owner compacts it periodically.
func (db *DB) CompactGroup(ctx context.Context, group string) error {
	g, ok := db.layout.GroupID(group)
	if !ok {
		return invalid("CompactGroup", "group", "unknown locality group %q", group)
	}
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	return db.pdb.Compact(ctx, []byte{byte(g)}, []byte{byte(g) + 1}, false)
}

// CompactTable compacts the keys of one table in one locality group. A
// garbage collection that removed much of a table calls it: its deletions
// are tombstones over versions further down the LSM, which every read of
// the table steps over until a compaction brings the two together, and
// pebble's own compactions reach them only as new writes push them down.
// Compacting the table's span makes the removal take effect at once, at
// the cost of rewriting that span (and only it: other tables' files are
// not touched unless they share one with it).
func (db *DB) CompactTable(ctx context.Context, group, table string) error {
	const op = "CompactTable"
	g, ok := db.layout.GroupID(group)
	if !ok {
		return invalid(op, "group", "unknown locality group %q", group)
	}
	if table == "" {
		return invalid(op, "table", "empty")
	}
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	start := keys.AppendTablePrefix(nil, g, table)
	if err := db.pdb.Compact(ctx, start, keys.PrefixSuccessor(start), false); err != nil {
		return fmt.Errorf("store: compacting table %q of group %q: %w", table, group, err)
	}
	return nil
}
