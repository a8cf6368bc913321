package percolator

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// This engine keeps a notification as a cell of the notify family, in the
// notify locality group, one version per write that announced it (the
// writer's start timestamp); a strong observer's last committed run is a
// cell of the ack family of the observed row (see protocol).

// Find yields the pending notifications of table in [start, end), reading
// the notify locality group only.
func (db *DB) Find(ctx context.Context, table string, start, end []byte) iter.Seq2[engine.Notification, error] {
	if err := engine.ValidateTable("Find", table); err != nil {
		return func(yield func(engine.Notification, error) bool) { yield(engine.Notification{}, err) }
	}
	return FindIn(ctx, db.st, table, start, end)
}

// FindIn is Find on a store that no DB is open on (operators' tools).
func FindIn(ctx context.Context, st store.Store, table string, start, end []byte) iter.Seq2[engine.Notification, error] {
	return func(yield func(engine.Notification, error) bool) {
		req := store.ScanRequest{
			Table: table, Group: protocol.NotifyGroup, Start: start, End: end,
			Filter: store.ColumnFilter{Families: []string{protocol.NotifyFamily}},
			Spans:  []store.Span{{MaxTs: ^uint64(0), Limit: 1}},
		}
		for c, err := range st.Scan(ctx, req) {
			if err != nil {
				yield(engine.Notification{}, fmt.Errorf("notify: finding notifications of %s: %w", table, err))
				return
			}
			n, err := notificationOf(table, c)
			if err != nil {
				err = fmt.Errorf("%w in %s row %q: %w", engine.ErrUndecodable, table, c.Row, err)
			}
			if !yield(n, err) {
				return
			}
		}
	}
}

// Backlog yields the pending notifications of table with their versions
// (see BacklogIn).
func (db *DB) Backlog(ctx context.Context, table string) iter.Seq2[engine.Waiting, error] {
	return BacklogIn(ctx, db.st, table)
}

// BacklogIn yields the pending notifications of table in st with their
// versions, newest first, reading every version of the notify locality
// group, which holds nothing else: its cost is that of the backlog.
func BacklogIn(ctx context.Context, st store.Store, table string) iter.Seq2[engine.Waiting, error] {
	return func(yield func(engine.Waiting, error) bool) {
		req := store.ScanRequest{
			Table: table, Group: protocol.NotifyGroup,
			Filter: store.ColumnFilter{Families: []string{protocol.NotifyFamily}},
			Spans:  []store.Span{store.AllVersions},
		}
		var w engine.Waiting
		var werr error
		var lastCol Column
		have := false
		for c, err := range st.Scan(ctx, req) {
			if err != nil {
				yield(engine.Waiting{}, fmt.Errorf("notify: the backlog of %s: %w", table, err))
				return
			}
			if !have || c.Column != lastCol || !bytes.Equal(c.Row, w.Row) {
				if have && !yield(w, werr) {
					return
				}
				n, err := notificationOf(table, c)
				if err != nil {
					n = engine.Notification{Table: table, Row: bytes.Clone(c.Row)}
					err = fmt.Errorf("%w in %s row %q: %w", engine.ErrUndecodable, table, c.Row, err)
				}
				w, werr, lastCol, have = engine.Waiting{Notification: n}, err, c.Column, true
			}
			w.Versions = append(w.Versions, c.Ts)
		}
		if have {
			yield(w, werr)
		}
	}
}

// notificationOf decodes the notification a notify-group cell of table
// stands for.
func notificationOf(table string, c store.Cell) (engine.Notification, error) {
	col, err := protocol.ObservedColumn(c.Column)
	if err != nil {
		return engine.Notification{}, err
	}
	return engine.Notification{Table: table, Row: c.Row, Column: col}, nil
}

// pending is this engine's Pending.State: the notify cell's versions and
// the safe point from before they were read.
type pending struct {
	versions  []store.Cell
	safePoint uint64
}

// Pending reads the versions of n's notify cell.
func (db *DB) Pending(ctx context.Context, n engine.Notification) (*engine.Pending, error) {
	// The safe point before the run: a writer that started below it can
	// no longer commit (the store refuses it), so its notification is
	// settled if its primary says nothing. One adopted after the run may
	// be above a writer that committed after the run's snapshot, whose
	// primary's records a collection removed.
	sp := db.SafePoint()
	versions, err := db.st.ReadRow(ctx, n.Table, n.Row, []Column{protocol.NotifyColumn(n.Column)}, nil)
	if err != nil {
		return nil, fmt.Errorf("notify: process %s: %w", n, err)
	}
	if len(versions) == 0 {
		return nil, nil
	}
	p := &engine.Pending{Notification: n, Versions: make([]uint64, len(versions)), State: &pending{versions: versions, safePoint: sp}}
	for i, v := range versions {
		p.Versions[i] = v.Ts
		nv, err := protocol.DecodeNotify(v.Value)
		if err != nil || len(nv.Trace) == 0 {
			continue // an undecodable value is left to Settle
		}
		if p.Traces == nil {
			p.Traces = make([][]byte, len(versions))
		}
		p.Traces[i] = nv.Trace
	}
	return p, nil
}

// ackKey is the cell holding a strong observer's ack for n's column: the
// start timestamp of its last committed run.
func ackKey(observer string, n engine.Notification) protocol.Key {
	q := observer + "\x00" + protocol.NotifyColumn(n.Column).Qualifier
	return protocol.Key{Table: n.Table, Row: n.Row, Column: Column{Family: protocol.AckFamily, Qualifier: q}}
}

// Claim compares, for a strong observer, the commit timestamp of p's cell
// with the observer's ack and, if the cell changed since, sets the ack to
// tx's start timestamp: two concurrent runs for one change collide on the
// ack. A weak observer's run goes ahead. Nothing of p is settled in tx:
// its notifications are versions of one cell that writers keep adding
// to, which Settle removes below the run's snapshot.
func (db *DB) Claim(ctx context.Context, etx engine.Txn, observer string, kind engine.Kind, p *engine.Pending) (bool, error) {
	tx, ok := etx.(*Txn)
	if !ok {
		return false, fmt.Errorf("%w: claim in a %T", ErrOtherEngine, etx)
	}
	if kind != engine.Strong {
		return true, nil
	}
	n := p.Notification
	ak := ackKey(observer, n)
	// One read for both cells, which as the run's first read also
	// chooses its snapshot where the store can.
	ws, err := tx.readWritesChecked(ctx, []protocol.Key{ak, {Table: n.Table, Row: n.Row, Column: n.Column}})
	if err != nil {
		return false, err
	}
	var ack uint64
	v, err := tx.writeValueChecked(ctx, ak, ws[0].Write)
	switch {
	case err == nil && len(v) == 8:
		ack = binary.BigEndian.Uint64(v)
	case err == nil:
		return false, fmt.Errorf("notify: ack of %s: %w", n, protocol.ErrCorrupt)
	case !errors.Is(err, ErrNotFound):
		return false, err
	}
	if changedAt := ws[1].CommitTs; changedAt <= ack {
		return false, nil
	}
	tx.setRaw(ak, protocol.OpPut, binary.BigEndian.AppendUint64(nil, tx.StartTs()))
	return true, nil
}

// Settle removes the versions of p that the run at runTs has dealt with:
// those whose write it could see or that will never happen. A write that
// committed while the observer ran keeps its notification, so the next
// run sees it.
func (db *DB) Settle(ctx context.Context, p *engine.Pending, runTs uint64) (engine.Settled, error) {
	var s engine.Settled
	st, err := pendingOf(p)
	if err != nil {
		return s, err
	}
	var done []store.Cell
	for _, v := range st.versions {
		if v.Ts > runTs {
			s.Kept++
			continue
		}
		nv, err := protocol.DecodeNotify(v.Value)
		if err != nil {
			return s, fmt.Errorf("notify: notification %s: %w", p.Notification, err)
		}
		if nv.HasWriter {
			status, err := db.txnStatus(ctx, nv.Primary, v.Ts)
			if err != nil {
				return s, err
			}
			// Below the safe point from before the run the writer's
			// records may be collected, and it could not commit after
			// that safe point was persisted: it is settled or will never
			// be. (Not the safe point now, which may have passed a
			// writer that committed after the run's snapshot.)
			gone := status.State == protocol.StateMissing && v.Ts < st.safePoint
			if !protocol.SettleNotification(v.Ts, runTs, status) && !gone {
				s.Kept++
				continue
			}
		}
		done = append(done, v)
	}
	s.Removed = len(done)
	return s, db.remove(ctx, p.Notification, done)
}

// Discard removes every version of p.
func (db *DB) Discard(ctx context.Context, p *engine.Pending) error {
	st, err := pendingOf(p)
	if err != nil {
		return err
	}
	return db.remove(ctx, p.Notification, st.versions)
}

func pendingOf(p *engine.Pending) (*pending, error) {
	st, ok := p.State.(*pending)
	if !ok {
		return nil, fmt.Errorf("%w: pending notification of %s read by another engine (%T)", ErrOtherEngine, p.Notification, p.State)
	}
	return st, nil
}

// remove deletes exactly these versions of the notify cell; a notification
// written meanwhile has another version and stays.
//
// The deletes are single deletes (store.Mutation.SingleDelete): a notify
// version is its writer's start timestamp (or a fresh one), written once,
// so the write and its delete vanish together at the next flush instead of
// leaving a tombstone in the notify group for every scan to step over until
// compaction. Only a retried unconditional write (a weak notification whose
// answer was lost) can write a version twice; the single delete may then
// let the first write come back, which costs one more settling: a strong
// notification is checked against its observer's ack and dropped without
// a run, a weak one may run its observer once more, which weak observers
// tolerate by contract.
func (db *DB) remove(ctx context.Context, n engine.Notification, versions []store.Cell) error {
	if len(versions) == 0 {
		return nil
	}
	muts := make([]store.Mutation, len(versions))
	for i, v := range versions {
		muts[i] = store.Mutation{Column: v.Column, Ts: v.Ts, Delete: true, SingleDelete: true}
	}
	_, err := db.st.Apply(ctx, &store.RowTxn{Table: n.Table, Row: n.Row, Mutations: muts, NoSync: true})
	if err != nil {
		return fmt.Errorf("notify: remove notification %s: %w", n, err)
	}
	return nil
}

// The claim reads the framework's own columns (acks), which Get refuses.

// readWritesChecked returns the newest write of each of keys (at most
// store.MaxRowReads) in the transaction's snapshot, resolving locks in the
// way, with one store call for all of them. It accepts reserved columns
// and does not look at the transaction's own writes. As a transaction's
// first read it chooses its snapshot where the store can (see store.TimestampReader):
// an observer's claim thus gets its snapshot, its ack and the observed
// cell's last change in one round trip.
func (tx *Txn) readWritesChecked(ctx context.Context, keys []protocol.Key) ([]WriteAt, error) {
	if err := tx.checkUsable(false); err != nil {
		return nil, err
	}
	if err := tx.checkSnapshot(); err != nil {
		return nil, err
	}
	ws, err := tx.readWrites(tx.withSpan(ctx), keys)
	if err != nil {
		return nil, err
	}
	if err := tx.verify(); err != nil {
		return nil, err
	}
	return ws, nil
}

// writeValueChecked returns the value w, a write record of k, stands for, or
// ErrNotFound if w is nil or a deletion.
func (tx *Txn) writeValueChecked(ctx context.Context, k protocol.Key, w *protocol.Write) ([]byte, error) {
	v, err := tx.db.writeValue(tx.withSpan(ctx), k, w)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if verr := tx.verify(); verr != nil {
		return nil, verr
	}
	return v, err
}
