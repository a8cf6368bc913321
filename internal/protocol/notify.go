package protocol

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/trickle-dev/trickle/internal/codec"
	"github.com/trickle-dev/trickle/store"
)

// Notifications. A cell whose observer must run is marked by a notify cell
// in the same table and row, in NotifyFamily (the notify locality
// group), with the observed column encoded in the qualifier. Its version is
// the start timestamp of the transaction that wrote the observed column (or
// a fresh timestamp for a standalone weak notification) and its value names
// that transaction's primary (empty for a standalone weak notification), so
// that whoever removes it can tell whether the write it announces is
// settled, and optionally carries the writer's trace context (NotifyValue).

// NotifyColumn is the notify-group column that marks col.
func NotifyColumn(col store.Column) store.Column {
	q := binary.AppendUvarint(nil, uint64(len(col.Family)))
	q = append(q, col.Family...)
	q = append(q, col.Qualifier...)
	return store.Column{Family: NotifyFamily, Qualifier: string(q)}
}

// ObservedColumn decodes the column a notify column marks.
func ObservedColumn(notify store.Column) (store.Column, error) {
	if notify.Family != NotifyFamily {
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
	d := codec.NewReader(b)
	k := readKey(&d)
	if d.Err() == nil && d.Len() != 0 {
		return k, fmt.Errorf("%w: %d trailing bytes in key", ErrCorrupt, d.Len())
	}
	if err := d.Err(); err != nil {
		return k, fmt.Errorf("%w: key: %w", ErrCorrupt, err)
	}
	return k, nil
}

// readKey reads what EncodeKey wrote.
func readKey(d *codec.Reader) Key {
	k := Key{Table: d.String(), Row: bytes.Clone(d.Bytes())}
	k.Column.Family = d.String()
	k.Column.Qualifier = d.String()
	return k
}

// NotifyMutation is the notify cell a transaction that started at startTs
// with the given primary writes beside an observed column. It goes into the
// same row transaction as the cell's prewrite, so that the notification
// exists before the commit point and no crash after it can lose it. trace,
// if not empty, is the writer's trace context (see NotifyValue).
func NotifyMutation(col store.Column, startTs uint64, primary Key, trace []byte) store.Mutation {
	return store.Mutation{Column: NotifyColumn(col), Ts: startTs, Value: NotifyValue(&primary, trace)}
}

// A notify value is one of
//
//	(empty)                        standalone weak notification, no writer
//	EncodeKey(primary)             written by the transaction with that primary
//	EncodeKey(primary) extensions  the same, with extensions
//	0x00 extensions                standalone, with extensions
//
// Extensions are a sequence of (tag byte, uvarint length, bytes); tags a
// reader does not know are skipped. A primary's encoding never starts with
// 0x00 (its table name is never empty), which is what tells the last form
// apart. The only extension so far is the writer's trace context (a W3C
// traceparent), present only when the writing transaction was traced, so
// that untraced writes store exactly what they always did. Values without
// extensions are what earlier versions wrote, and still decode.
const (
	notifyNoWriter = 0x00
	extTrace       = 0x01
)

// Notify is a decoded notify value.
type Notify struct {
	// Primary is the writer's primary; HasWriter is false for a standalone
	// weak notification.
	Primary   Key
	HasWriter bool
	// Trace is the writer's trace context, or nil.
	Trace []byte
}

// NotifyValue encodes a notify value naming the writer's primary (nil for a
// standalone notification) and, if trace is not empty, its trace context.
func NotifyValue(primary *Key, trace []byte) []byte {
	var b []byte
	switch {
	case primary != nil:
		b = EncodeKey(*primary)
	case len(trace) > 0:
		b = []byte{notifyNoWriter}
	default:
		return []byte{}
	}
	if len(trace) > 0 {
		b = append(b, extTrace)
		b = appendBytes(b, trace)
	}
	return b
}

// DecodeNotify parses a notify value.
func DecodeNotify(b []byte) (Notify, error) {
	var n Notify
	if len(b) == 0 {
		return n, nil
	}
	d := codec.NewReader(b)
	if b[0] == notifyNoWriter {
		d.Byte()
	} else {
		n.HasWriter = true
		n.Primary = readKey(&d)
	}
	for d.Err() == nil && d.Len() > 0 {
		tag := d.Byte()
		v := bytes.Clone(d.Bytes())
		if tag == extTrace && d.Err() == nil {
			n.Trace = v
		}
	}
	if err := d.Err(); err != nil {
		return Notify{}, fmt.Errorf("%w: notify value: %w", ErrCorrupt, err)
	}
	return n, nil
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
