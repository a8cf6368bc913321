package framework

import (
	"context"
	"encoding/binary"
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
	for _, group := range []string{store.DefaultGroup, store.NotifyGroup} {
		for c, err := range st.Scan(ctx, store.ScanRequest{Table: table, Group: group, Start: o.Start, End: o.End}) {
			if err != nil {
				return err
			}
			line, err := describeCell(c, ts)
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

func describeCell(c store.Cell, ts func(uint64) string) (string, error) {
	if c.Column.Family == store.NotifyFamily {
		col, err := protocol.ObservedColumn(c.Column)
		if err != nil {
			return "", err
		}
		s := fmt.Sprintf("%s notify@%s", col, ts(c.Ts))
		nv, err := protocol.DecodeNotify(c.Value)
		if err != nil {
			return "", err
		}
		if !nv.HasWriter {
			s += " weak"
		} else {
			s += " writer-primary=" + nv.Primary.String()
		}
		if len(nv.Trace) > 0 {
			s += " trace=" + string(nv.Trace)
		}
		return s, nil
	}
	kind, t := protocol.Untag(c.Ts)
	col := c.Column.String()
	switch kind {
	case protocol.KindLock:
		l, err := protocol.DecodeLock(c.Value)
		if err != nil {
			return "", err
		}
		s := fmt.Sprintf("%s lock start=%s %s primary=%s holder=%s", col, ts(l.StartTs), l.Op, l.Primary, l.Holder)
		if l.Inline {
			s += " value=" + string(l.Value)
		}
		return s, nil
	case protocol.KindWrite:
		wr, err := protocol.DecodeWrite(c.Value)
		if err != nil {
			return "", err
		}
		s := fmt.Sprintf("%s write@%s %s start=%s", col, ts(t), wr.Op, ts(wr.StartTs))
		if c.Column.Family == ackFamily && len(wr.Value) == 8 {
			return s + " ack=" + ts(binary.BigEndian.Uint64(wr.Value)), nil
		}
		if wr.Inline {
			s += " value=" + string(wr.Value)
		}
		return s, nil
	case protocol.KindRollback:
		return fmt.Sprintf("%s rollback@%s", col, ts(t)), nil
	case protocol.KindData:
		return fmt.Sprintf("%s data@%s value=%s", col, ts(t), c.Value), nil
	}
	return fmt.Sprintf("%s raw@%d", col, c.Ts), nil
}
