package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/trickle-dev/trickle/store"
)

// Describe renders a raw cell — a value, lock, write or rollback record, ack
// or notification — decoded, for debugging tools; ts renders timestamps.
func Describe(c store.Cell, ts func(uint64) string) (string, error) {
	if c.Column.Family == NotifyFamily {
		col, err := ObservedColumn(c.Column)
		if err != nil {
			return "", err
		}
		s := fmt.Sprintf("%s notify@%s", col, ts(c.Ts))
		nv, err := DecodeNotify(c.Value)
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
	kind, t := Untag(c.Ts)
	col := c.Column.String()
	switch kind {
	case KindLock:
		l, err := DecodeLock(c.Value)
		if err != nil {
			return "", err
		}
		s := fmt.Sprintf("%s lock start=%s %s primary=%s holder=%s", col, ts(l.StartTs), l.Op, l.Primary, l.Holder)
		if l.Inline {
			s += " value=" + string(l.Value)
		}
		return s, nil
	case KindWrite:
		wr, err := DecodeWrite(c.Value)
		if err != nil {
			return "", err
		}
		s := fmt.Sprintf("%s write@%s %s start=%s", col, ts(t), wr.Op, ts(wr.StartTs))
		if c.Column.Family == AckFamily && len(wr.Value) == 8 {
			return s + " ack=" + ts(binary.BigEndian.Uint64(wr.Value)), nil
		}
		if wr.Inline {
			s += " value=" + string(wr.Value)
		}
		return s, nil
	case KindRollback:
		return fmt.Sprintf("%s rollback@%s", col, ts(t)), nil
	case KindData:
		return fmt.Sprintf("%s data@%s value=%s", col, ts(t), c.Value), nil
	}
	return fmt.Sprintf("%s raw@%d", col, c.Ts), nil
}
