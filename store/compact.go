package store

import (
	"context"
	"fmt"
)

// CompactGroup compacts one locality group's key range. Removed cells
// leave tombstones that scans must step over until compaction drops them;
// a group whose cells are written and deleted all the time (a queue of
// work, such as the transaction framework's notifications) piles them up,
// and its owner compacts it periodically.
func (db *DB) CompactGroup(ctx context.Context, group string) error {
	g, ok := db.layout.GroupID(group)
	if !ok {
		return &InvalidError{Op: "CompactGroup", Field: "group", Reason: fmt.Sprintf("unknown locality group %q", group)}
	}
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	return db.pdb.Compact(ctx, []byte{byte(g)}, []byte{byte(g) + 1}, false)
}
