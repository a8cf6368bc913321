package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/trickle-dev/trickle/store"
)

// Notifications. A cell whose observer must run is marked by a notify cell
// in the same table and row, in store.NotifyFamily (the notify locality
// group), with the observed column encoded in the qualifier. Its version is
// the start timestamp of the transaction that wrote the observed column (or
// a fresh timestamp for a standalone weak notification) and its value names
// that transaction's primary (empty for a standalone weak notification), so
// that whoever removes it can tell whether the write it announces is
// settled.

// NotifyColumn is the notify-group column that marks col.
func NotifyColumn(col store.Column) store.Column {
	q := binary.AppendUvarint(nil, uint64(len(col.Family)))
	q = append(q, col.Family...)
	q = append(q, col.Qualifier...)
	return store.Column{Family: store.NotifyFamily, Qualifier: string(q)}
}

// ObservedColumn decodes the column a notify column marks.
func ObservedColumn(notify store.Column) (store.Column, error) {
	if notify.Family != store.NotifyFamily {
		return store.Column{}, fmt.Errorf("%w: %q is not a notify column", ErrCorrupt, notify.Family)
	}
	q := []byte(notify.Qualifier)
	n, w := binary.Uvarint(q)
	if w <= 0 || uint64(len(q)-w) < n {
		return store.Column{}, fmt.Errorf("%w: notify qualifier %q", ErrCorrupt, notify.Qualifier)
	}
	return store.Column{Family: string(q[w : w+int(n)]), Qualifier: string(q[w+int(n):])}, nil
}

// EncodeKey serializes a cell address (a notification's writer primary).
func EncodeKey(k Key) []byte {
	b := appendBytes(nil, []byte(k.Table))
	b = appendBytes(b, k.Row)
	b = appendBytes(b, []byte(k.Column.Family))
	return appendBytes(b, []byte(k.Column.Qualifier))
}

// DecodeKey parses EncodeKey's output.
func DecodeKey(b []byte) (Key, error) {
	d := decoder{b: b}
	k := Key{Table: string(d.bytes()), Row: d.bytes()}
	k.Column.Family = string(d.bytes())
	k.Column.Qualifier = string(d.bytes())
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes in key", ErrCorrupt, len(d.b))
	}
	return k, d.err
}

// NotifyMutation is the notify cell a transaction that started at startTs
// with the given primary writes beside an observed column. It goes into the
// same row transaction as the cell's prewrite, so that the notification
// exists before the commit point and no crash after it can lose it.
func NotifyMutation(col store.Column, startTs uint64, primary Key) store.Mutation {
	return store.Mutation{Column: NotifyColumn(col), Ts: startTs, Value: EncodeKey(primary)}
}

// SettleNotification decides whether the notify version at ts, announcing
// a write by the transaction whose primary's fate is writer, can be removed
// by an observer run whose snapshot was at runTs: yes if that write is
// visible to the run (committed at or before runTs) or will never happen
// (rolled back). A write committed after runTs, or still pending, keeps its
// notification for the next run.
func SettleNotification(ts, runTs uint64, writer Status) bool {
	if ts > runTs {
		return false
	}
	switch writer.State {
	case StateCommitted:
		return writer.CommitTs <= runTs
	case StateRolledBack:
		return true
	}
	return false
}
