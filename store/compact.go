package store

import (
	"context"
	"fmt"
)

// CompactGroup compacts one locality group's key range. Removed cells
// leave tombstones that scans must step over until compaction drops them;
// the notify group, where every processed notification is deleted, is where
// they pile up, so runners compact it periodically.
func (db *DB) CompactGroup(ctx context.Context, group string) error {
	g, ok := db.layout.groupID(group)
	if !ok {
		return &InvalidError{Op: "CompactGroup", Field: "group", Reason: fmt.Sprintf("unknown locality group %q", group)}
	}
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	return db.pdb.Compact(ctx, []byte{byte(g)}, []byte{byte(g) + 1}, false)
}
