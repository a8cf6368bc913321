package tikvengine

import (
	"bytes"

	tikvclient "github.com/tikv/client-go/v2/tikv"
)

// bufferedEntry is a write of a transaction's buffer, copied: an empty
// value is a deletion (stored values are framed, never empty).
type bufferedEntry struct{ key, value []byte }

// mergedIter yields a snapshot's entries merged with a copy of buffered
// writes, in key order: a buffered write replaces the stored value of its
// key, and a buffered deletion hides it. It reads the buffer only through
// the copy, so the transaction may write while it is open.
type mergedIter struct {
	snap tikvclient.Iterator
	buf  []bufferedEntry
	// fromBuf says the current entry is buf[0]; else it is snap's.
	fromBuf bool
}

// settle moves to the next entry to yield, passing over deletions.
func (m *mergedIter) settle() error {
	for {
		switch {
		case len(m.buf) == 0:
			m.fromBuf = false
			return nil
		case !m.snap.Valid():
			m.fromBuf = true
		default:
			switch c := bytes.Compare(m.buf[0].key, m.snap.Key()); {
			case c > 0:
				m.fromBuf = false
				return nil
			case c == 0:
				// The buffered write replaces the stored value.
				if err := m.snap.Next(); err != nil {
					return err
				}
				continue
			default:
				m.fromBuf = true
			}
		}
		if len(m.buf[0].value) > 0 {
			return nil
		}
		m.buf = m.buf[1:] // a deletion of a key the snapshot does not hold (or no longer shows)
	}
}

func (m *mergedIter) Valid() bool { return len(m.buf) > 0 || m.snap.Valid() }

func (m *mergedIter) Key() []byte {
	if m.fromBuf {
		return m.buf[0].key
	}
	return m.snap.Key()
}

func (m *mergedIter) Value() []byte {
	if m.fromBuf {
		return m.buf[0].value
	}
	return m.snap.Value()
}

func (m *mergedIter) Next() error {
	if m.fromBuf {
		m.buf = m.buf[1:]
	} else if err := m.snap.Next(); err != nil {
		return err
	}
	return m.settle()
}

func (m *mergedIter) Close() { m.snap.Close() }
