package admin

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// DumpOptions control Dump.
type DumpOptions struct {
	// Start and End bound the rows (nil: unbounded).
	Start, End []byte
	// FormatTs renders timestamps; default decimal.
	FormatTs func(uint64) string
}

// Dump writes every raw cell of a table — values, locks, write and rollback
// records, acks and notifications — decoded, one per line. It is a
// debugging aid: what a transaction would read is what Txn.Scan returns.
func Dump(ctx context.Context, st store.Store, table string, w io.Writer, o DumpOptions) error {
	ts := o.FormatTs
	if ts == nil {
		ts = func(t uint64) string { return strconv.FormatUint(t, 10) }
	}
	for _, group := range []string{store.DefaultGroup, protocol.NotifyGroup} {
		for c, err := range st.Scan(ctx, store.ScanRequest{Table: table, Group: group, Start: o.Start, End: o.End}) {
			if err != nil {
				return err
			}
			line, err := protocol.Describe(c, ts)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "%q %s\n", c.Row, line); err != nil {
				return err
			}
		}
	}
	return nil
}
