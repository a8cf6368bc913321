package runner

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/internal/codec"
	"github.com/trickle-dev/trickle/internal/percolator"
)

// A wake-up (see Node.WakeRunners) names the rows its commit notified, and
// the columns notified in each, so that the runners that hear it run those
// observers instead of making a pass over every notification; one that
// names none (the commit notified too many, or they would not fit
// maxWakeBytes) makes them pass. Its header names the process that sent
// it, whose own runner has already been told and ignores the echo.
//
// Version 1 named rows only; it is still read (the rows are then looked
// at whole). A process that reads version 1 only makes a pass for a
// version 2 wake-up, as for any it cannot read.
const (
	wakeFromHeader = "Trickle-Wake-From"
	wakeVersion    = 2
	wakeRowsOnly   = 1
	// maxWakeBytes bounds a wake-up's list of rows: past it, the list is
	// left out.
	maxWakeBytes = 16 << 10
)

// newWakeID returns the id a process's wake-ups carry.
func newWakeID() string { return uuid.NewString() }

// encodeWake encodes rows for a wake-up: nil when there are none or they
// would not fit in maxWakeBytes.
func encodeWake(rows []percolator.NotifiedRow) []byte {
	if len(rows) == 0 {
		return nil
	}
	b := []byte{wakeVersion}
	str := func(s []byte) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, r := range rows {
		str([]byte(r.Table))
		str(r.Row)
		b = binary.AppendUvarint(b, uint64(len(r.Columns)))
		for _, c := range r.Columns {
			str([]byte(c.Family))
			str([]byte(c.Qualifier))
		}
		if len(b) > maxWakeBytes {
			return nil
		}
	}
	return b
}

// errWakeVersion is decodeWake's error for a list it cannot read.
var errWakeVersion = errors.New("runner: wake-up of an unknown version")

// decodeWake decodes a wake-up's rows (nil for none). A list it cannot
// read is an error: the receiver then makes a pass, as for none.
func decodeWake(b []byte) ([]percolator.NotifiedRow, error) {
	if len(b) == 0 {
		return nil, nil
	}
	version := b[0]
	if version != wakeVersion && version != wakeRowsOnly {
		return nil, errWakeVersion
	}
	r := codec.NewReader(b[1:])
	var rows []percolator.NotifiedRow
	for r.Len() > 0 && r.Err() == nil {
		table := r.String()
		row := r.Bytes()
		if r.Err() == nil && (table == "" || len(row) == 0) {
			return nil, errors.New("runner: wake-up names an empty table or row")
		}
		var cols []percolator.Column
		if version == wakeVersion {
			n := r.Uvarint()
			if n > uint64(r.Len()) { // each column takes at least one byte
				return nil, fmt.Errorf("runner: wake-up names %d columns in %d bytes", n, r.Len())
			}
			for range n {
				c := percolator.Column{Family: r.String(), Qualifier: r.String()}
				if r.Err() == nil && c.Family == "" {
					return nil, errors.New("runner: wake-up names a column with no family")
				}
				cols = append(cols, c)
			}
		}
		rows = append(rows, percolator.NotifiedRow{Table: table, Row: row, Columns: cols})
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return rows, nil
}

// wakeMsg is the wake-up of this process for rows.
func (n *Node) wakeMsg(rows []percolator.NotifiedRow) *nats.Msg {
	m := nats.NewMsg(n.wakeSubject())
	m.Header.Set(wakeFromHeader, n.wakeID)
	m.Data = encodeWake(rows)
	return m
}

// onWake handles a wake-up heard on the deployment's wake subject: the
// echo of this process's own is ignored; others hint the rows they name
// to the runner's scanners, or wake them.
func (r *Runner) onWake(m *nats.Msg) {
	rows, mine, err := heardWake(m, r.node.wakeID)
	if mine {
		return
	}
	if err != nil {
		r.node.log.Debug("unreadable wake-up; looking everywhere", "err", err)
	}
	r.tellScanners(rows)
}

// heardWake reads a wake-up heard by the process with wake id self: the
// rows it names (nil: look everywhere, also when it cannot be read, with
// the error saying why) and whether it is self's own echo.
func heardWake(m *nats.Msg, self string) (rows []percolator.NotifiedRow, mine bool, err error) {
	if m.Header.Get(wakeFromHeader) == self {
		return nil, true, nil
	}
	rows, err = decodeWake(m.Data)
	return rows, false, err
}

// tellScanners hints rows to this runner's scanners, or wakes them for
// nil rows; a no-op before the scanners exist.
func (r *Runner) tellScanners(rows []percolator.NotifiedRow) {
	if sc := r.woken.Load(); sc != nil {
		sc.Notified(rows)
	}
}
