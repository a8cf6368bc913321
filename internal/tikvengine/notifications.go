package tikvengine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tikv/client-go/v2/kv"
	"github.com/tikv/client-go/v2/txnkv/txnsnapshot"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/internal/tikvcall"
)

// A notification is a key of the notification range per notifying write:
// the cell and the writer's start timestamp (see the package doc),
// written in the writer's transaction. Its value is the writer's trace
// context (W3C traceparent), empty if it had none.

// ErrOtherEngine is returned when a transaction or a pending notification
// of another engine is handed to this one.
var ErrOtherEngine = errors.New("tikvengine: not this engine's")

// NotifyWeak asks the weak observer of (table, col) to look at row,
// outside any transaction: a transaction of its own that writes one
// notification. It is durable when NotifyWeak returns.
func (db *DB) NotifyWeak(ctx context.Context, table string, row []byte, col engine.Column) error {
	if err := engine.ValidateKey("NotifyWeak", table, row, col); err != nil {
		return err
	}
	if err := db.checkWeak(table, col); err != nil {
		return err
	}
	return db.Transact(ctx, engine.TxnOptions{}, func(_ context.Context, tx engine.Txn) error {
		return tx.NotifyWeak(table, row, col)
	})
}

// Find yields the cells of table in [start, end) that have notifications,
// each once, in row then column order. It reads the notification range
// only, keys without values, in requests of Options.ScanBatchSize keys;
// past a column with more notifications than that it seeks to the next
// column instead of reading through them.
func (db *DB) Find(ctx context.Context, table string, start, end []byte) iter.Seq2[engine.Notification, error] {
	return func(yield func(engine.Notification, error) bool) {
		if err := engine.ValidateTable("Find", table); err != nil {
			yield(engine.Notification{}, err)
			return
		}
		if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
			return
		}
		if err := db.find(ctx, table, start, end, yield); err != nil {
			yield(engine.Notification{}, fmt.Errorf("notify: finding notifications of %s: %w", table, err))
		}
	}
}

func (db *DB) find(ctx context.Context, table string, start, end []byte, yield func(engine.Notification, error) bool) error {
	// A fresh timestamp: every commit that returned before Find began is
	// at or below it (a moment-old one, such as client-go's cached
	// timestamp, would miss the last commits, and wait could report idle
	// right after a load).
	ts, err := db.timestamp(ctx)
	if err != nil {
		return err
	}
	lower, upper := db.codec.rowBounds(notifyRange, table, start, end)
	// Locked notifications first (see lockcheck.go), merged into the
	// committed ones below.
	var locked [][]byte
	if db.checks.due(table, time.Now(), db.opts.LockCheckInterval) {
		if locked, err = db.lockedKeys(ctx, lower, upper, ts); err != nil {
			return err
		}
	}
	snap, stop := db.snapshot(ctx, ts)
	defer stop()
	snap.SetKeyOnly(true)
	// Read committed: a notification whose writer has not finished
	// committing is left to a later pass (or the commit's wake-up), or
	// the lock check's, as one committed after ts is, instead of waiting
	// for its lock or resolving it. The notification range is where every
	// observed write's locks are; a pass at snapshot isolation would meet
	// them all the time.
	snap.SetIsolationLevel(txnsnapshot.RC)
	it, err := snap.Iter(lower, upper)
	if err != nil {
		return failIn(ctx, "Find", err)
	}
	defer func() { it.Close() }()
	var last []byte // the column prefix of the last notification yielded
	// cell yields the notification of key k unless its cell was the last
	// one yielded; it reports whether to go on.
	cell := func(k []byte) bool {
		if len(k) > keys.TsLen && last != nil && bytes.Equal(k[:len(k)-keys.TsLen], last) {
			return true
		}
		row, col, err := db.codec.cellOf(k, nil, true)
		if err != nil {
			err = fmt.Errorf("%w in %s: %w", engine.ErrUndecodable, table, err)
		} else {
			last = append(last[:0], k[:len(k)-keys.TsLen]...)
		}
		return yield(engine.Notification{Table: table, Row: row, Column: col}, err)
	}
	skipped := 0
	for steps := 0; it.Valid(); steps++ {
		if steps%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k := it.Key()
		for ; len(locked) > 0 && bytes.Compare(locked[0], k) < 0; locked = locked[1:] {
			if !cell(locked[0]) {
				return nil
			}
		}
		if len(k) > keys.TsLen && last != nil && bytes.Equal(k[:len(k)-keys.TsLen], last) {
			if skipped++; skipped >= db.opts.ScanBatchSize {
				skipped = 0
				it.Close()
				if it, err = snap.Iter(keys.PrefixSuccessor(last), upper); err != nil {
					return failIn(ctx, "Find", err)
				}
				continue
			}
		} else {
			skipped = 0
			if !cell(k) {
				return nil
			}
		}
		if err := it.Next(); err != nil {
			return failIn(ctx, "Find", err)
		}
	}
	for _, k := range locked {
		if !cell(k) {
			return nil
		}
	}
	return nil
}

// Backlog yields the pending notifications of table with their versions
// (the writers' start timestamps, newest first), reading the keys of the
// table's notification range without their values.
func (db *DB) Backlog(ctx context.Context, table string) iter.Seq2[engine.Waiting, error] {
	return func(yield func(engine.Waiting, error) bool) {
		if err := engine.ValidateTable("Backlog", table); err != nil {
			yield(engine.Waiting{}, err)
			return
		}
		if err := db.backlog(ctx, table, yield); err != nil {
			yield(engine.Waiting{}, fmt.Errorf("notify: the backlog of %s: %w", table, err))
		}
	}
}

func (db *DB) backlog(ctx context.Context, table string, yield func(engine.Waiting, error) bool) error {
	ts, err := db.timestamp(ctx)
	if err != nil {
		return err
	}
	snap, stop := db.snapshot(ctx, ts)
	defer stop()
	snap.SetKeyOnly(true)
	lower, upper := db.codec.rowBounds(notifyRange, table, nil, nil)
	it, err := snap.Iter(lower, upper)
	if err != nil {
		return failIn(ctx, "Backlog", err)
	}
	defer it.Close()
	var w engine.Waiting
	var werr error
	var last []byte // the cell prefix of w
	for steps := 0; it.Valid(); steps++ {
		if steps%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k := it.Key()
		if len(k) <= keys.TsLen || last == nil || !bytes.Equal(k[:len(k)-keys.TsLen], last) {
			if last != nil && !yield(w, werr) {
				return nil
			}
			row, col, err := db.codec.cellOf(k, nil, true)
			if err != nil {
				err = fmt.Errorf("%w in %s: %w", engine.ErrUndecodable, table, err)
			}
			w, werr = engine.Waiting{Notification: engine.Notification{Table: table, Row: row, Column: col}}, err
			last = append(last[:0], k[:max(len(k)-keys.TsLen, 0)]...)
		}
		if len(k) > keys.TsLen {
			w.Versions = append(w.Versions, keys.DecodeTs(k))
		}
		if err := it.Next(); err != nil {
			return failIn(ctx, "Backlog", err)
		}
	}
	if last != nil {
		yield(w, werr)
	}
	return nil
}

// pending is this engine's Pending.State: the notification keys read and
// the timestamp they were read at, every one committed at or before it.
type pending struct {
	keys   [][]byte
	readTs uint64
	// settledBy is the start timestamp of the last run transaction that
	// removed keys with its commit (see Txn.settle), 0 if none did.
	settledBy atomic.Uint64
}

// Pending reads the notification keys of n at a fresh timestamp, newest
// writer first. Called before the run's snapshot is drawn, every key it
// returns was committed before that snapshot, which is what lets Settle
// remove them without asking when.
func (db *DB) Pending(ctx context.Context, n engine.Notification) (*engine.Pending, error) {
	if err := engine.ValidateKey("Pending", n.Table, n.Row, n.Column); err != nil {
		return nil, err
	}
	prefix := db.codec.notifyPrefix(n.Table, n.Row, n.Column)
	if p := db.recent.take(prefix, n); p != nil {
		return p, nil
	}
	ctx, cancel := db.deadline(ctx)
	defer cancel()
	ts, err := db.timestamp(ctx)
	if err != nil {
		return nil, err
	}
	snap, stop := db.snapshot(ctx, ts)
	defer stop()
	ks, vs, err := notificationsOf(ctx, snap, prefix)
	if err != nil || len(ks) == 0 {
		return nil, err
	}
	p := &engine.Pending{Notification: n, Versions: make([]uint64, len(ks)), State: &pending{keys: ks, readTs: ts}}
	for i, k := range ks {
		p.Versions[i] = keys.DecodeTs(k)
		tp, err := tikvcall.Unframe(k, vs[i], ErrCorrupt)
		if err != nil || len(tp) == 0 {
			continue
		}
		if p.Traces == nil {
			p.Traces = make([][]byte, len(ks))
		}
		p.Traces[i] = tp
	}
	return p, nil
}

// notificationsOf returns the notification keys under prefix in snap and
// their values, newest writer first.
func notificationsOf(ctx context.Context, snap *txnsnapshot.KVSnapshot, prefix []byte) (ks, vs [][]byte, err error) {
	it, err := snap.Iter(prefix, keys.PrefixSuccessor(prefix))
	if err != nil {
		return nil, nil, failIn(ctx, "reading notifications", err)
	}
	defer it.Close()
	for it.Valid() {
		ks = append(ks, bytes.Clone(it.Key()))
		vs = append(vs, bytes.Clone(it.Value()))
		if err := it.Next(); err != nil {
			return nil, nil, failIn(ctx, "reading notifications", err)
		}
	}
	return ks, vs, nil
}

// Claim decides, in the run's transaction etx, whether n's cell changed
// since observer's last committed run, and if so makes this run the last.
//
// The ack is a key of the ack range holding the start timestamp of the
// observer's last committed run. The cell changed iff its last commit
// timestamp is above the ack: a run at start timestamp s saw exactly the
// versions committed at or before s. Both come from one batched read of
// the run's snapshot that asks TiKV for commit timestamps. A deleted cell
// has no version to ask about; its notifications stand in, as each was
// committed with the write that left it: the cell changed iff one visible
// to the run was committed above the ack (a settled one was seen by a run
// whose ack covers it).
//
// If the cell changed, the run writes its start timestamp to the ack.
// Two concurrent runs for one change both write the ack, and TiKV lets at
// most one of them commit: the other's prewrite meets the first's lock or
// its newer commit record and fails with a write conflict, and Transact
// runs it again at a new snapshot, where the ack covers the change.
func (db *DB) Claim(ctx context.Context, etx engine.Txn, observer string, kind engine.Kind, p *engine.Pending) (bool, error) {
	tx, ok := etx.(*Txn)
	if !ok {
		return false, fmt.Errorf("%w: claim in a %T", ErrOtherEngine, etx)
	}
	if err := tx.checkUsable(true); err != nil {
		return false, err
	}
	if p == nil {
		return false, fmt.Errorf("%w: Claim: no pending notification", engine.ErrInvalidKey)
	}
	n := p.Notification
	if err := engine.ValidateKey("Claim", n.Table, n.Row, n.Column); err != nil {
		return false, err
	}
	if observer == "" {
		return false, fmt.Errorf("%w: Claim: empty observer name", engine.ErrInvalidKey)
	}
	if err := tx.settle(p); err != nil {
		return false, err
	}
	tx.run = &runReads{observer: observer, table: n.Table, row: bytes.Clone(n.Row)}
	if kind != engine.Strong {
		st, _ := pendingOf(p) // settle checked it
		return tx.weakClaim(ctx, observer, p, st.keys)
	}
	ak := db.codec.ackKey(observer, n.Table, n.Row, n.Column)
	ck := db.codec.dataKey(n.Table, n.Row, n.Column)
	// The snapshot, not the transaction: its buffered writes have no
	// commit timestamp. What the observer's runs are expected to read
	// comes in the same request (see prefetch.go).
	snap := tx.txn.GetSnapshot()
	ks := [][]byte{ak, ck}
	for _, k := range db.predict.predict(db.codec, observer, n.Table, n.Row) {
		if !bytes.Equal(k, ck) {
			ks = append(ks, k)
		}
	}
	got, err := snap.BatchGet(ctx, ks, kv.WithReturnCommitTS())
	if err != nil {
		return false, failIn(ctx, "claiming "+n.String(), err)
	}
	var ack uint64
	if e, ok := got[string(ak)]; ok {
		v, err := tikvcall.Unframe(ak, e.Value, ErrCorrupt)
		if err != nil {
			return false, err
		}
		if len(v) != 8 {
			return false, fmt.Errorf("%w: ack of %s for %s is %d bytes", ErrCorrupt, observer, n, len(v))
		}
		ack = binary.BigEndian.Uint64(v)
	}
	var changedAt uint64
	if e, ok := got[string(ck)]; ok {
		changedAt = e.CommitTS
	} else if changedAt, err = db.lastNotified(ctx, snap, n); err != nil {
		return false, err
	}
	if changedAt <= ack {
		return false, nil
	}
	if err := tx.txn.Set(ak, tikvcall.Frame(binary.BigEndian.AppendUint64(nil, tx.startTs))); err != nil {
		return false, fail("claiming "+n.String(), err)
	}
	return true, nil
}

// settle removes p's notification keys in tx, with the run's commit: the
// run's snapshot was drawn after Pending read them, so it sees every
// write they announce. A writer that notifies the cell meanwhile writes a
// key of its own, which stays; two runs that settle the same keys
// conflict, and the one run again finds them gone. Settle, once the run
// committed, then has nothing left to remove.
func (tx *Txn) settle(p *engine.Pending) error {
	st, err := pendingOf(p)
	if err != nil {
		return err
	}
	if st.readTs > tx.startTs {
		return nil // not a run the runtime ordered: Settle decides
	}
	for _, k := range st.keys {
		if err := tx.txn.Delete(k); err != nil {
			return fail("settling "+p.Notification.String(), err)
		}
	}
	st.settledBy.Store(tx.startTs)
	return nil
}

// lastNotified returns the highest commit timestamp of n's notifications
// in snap (0 if none): the last change of a cell that has no value.
func (db *DB) lastNotified(ctx context.Context, snap *txnsnapshot.KVSnapshot, n engine.Notification) (uint64, error) {
	ks, _, err := notificationsOf(ctx, snap, db.codec.notifyPrefix(n.Table, n.Row, n.Column))
	if err != nil || len(ks) == 0 {
		return 0, err
	}
	got, err := snap.BatchGet(ctx, ks, kv.WithReturnCommitTS())
	if err != nil {
		return 0, failIn(ctx, "claiming "+n.String(), err)
	}
	var last uint64
	for _, e := range got {
		last = max(last, e.CommitTS)
	}
	return last, nil
}

// Settle removes the notification keys of p whose writes the run at runTs
// could see: those committed at or before runTs. Every key Pending read
// was committed at or before its read timestamp, so when the run started
// after Pending (as the runtime does it) all of them go; otherwise a key
// whose writer started after runTs stays, and the others' commit
// timestamps are asked for. A key written after Pending is not in p and
// stays. The removal is a transaction of its own, which no writer
// conflicts with: a writer that notifies the cell again writes another
// key.
func (db *DB) Settle(ctx context.Context, p *engine.Pending, runTs uint64) (engine.Settled, error) {
	var s engine.Settled
	st, err := pendingOf(p)
	if err != nil {
		return s, err
	}
	if by := st.settledBy.Load(); by != 0 && by == runTs {
		// The run that committed at runTs removed them all.
		s.Removed = len(st.keys)
		return s, nil
	}
	var done, unsure [][]byte
	for _, k := range st.keys {
		switch {
		case st.readTs <= runTs:
			done = append(done, k)
		case keys.DecodeTs(k) >= runTs:
			s.Kept++
		default:
			unsure = append(unsure, k)
		}
	}
	if len(unsure) > 0 {
		visible, err := db.committedBy(ctx, st.readTs, unsure, runTs)
		if err != nil {
			return s, err
		}
		done = append(done, visible...)
		s.Kept += len(unsure) - len(visible)
	}
	s.Removed = len(done)
	if err := db.remove(ctx, done); err != nil {
		return engine.Settled{}, fmt.Errorf("notify: settle %s: %w", p.Notification, err)
	}
	return s, nil
}

// committedBy returns those of ks (read at readTs) committed at or before
// ts.
func (db *DB) committedBy(ctx context.Context, readTs uint64, ks [][]byte, ts uint64) ([][]byte, error) {
	ctx, cancel := db.deadline(ctx)
	defer cancel()
	snap, stop := db.snapshot(ctx, readTs)
	defer stop()
	got, err := snap.BatchGet(ctx, ks, kv.WithReturnCommitTS())
	if err != nil {
		return nil, failIn(ctx, "reading notifications' commit timestamps", err)
	}
	var out [][]byte
	for _, k := range ks {
		if e, ok := got[string(k)]; ok && e.CommitTS <= ts {
			out = append(out, k)
		}
	}
	return out, nil
}

// Discard removes every notification key of p.
func (db *DB) Discard(ctx context.Context, p *engine.Pending) error {
	st, err := pendingOf(p)
	if err != nil {
		return err
	}
	if err := db.remove(ctx, st.keys); err != nil {
		return fmt.Errorf("notify: discard %s: %w", p.Notification, err)
	}
	return nil
}

func pendingOf(p *engine.Pending) (*pending, error) {
	st, ok := p.State.(*pending)
	if !ok {
		return nil, fmt.Errorf("%w: pending notification of %s read by another engine (%T)", ErrOtherEngine, p.Notification, p.State)
	}
	return st, nil
}

// remove deletes keys in one transaction (retried as Transact retries).
func (db *DB) remove(ctx context.Context, ks [][]byte) error {
	if len(ks) == 0 {
		return nil
	}
	return db.transact(ctx, engine.TxnOptions{}, func(_ context.Context, etx engine.Txn) error {
		tx := etx.(*Txn)
		for _, k := range ks {
			if err := tx.txn.Delete(k); err != nil {
				return fail("removing notifications", err)
			}
		}
		return nil
	})
}

// Renotify notifies the cells of rows, whatever their observers' kind, in
// transactions of their own (of up to renotifyBatch cells): a key per cell
// at the transaction's start timestamp, as a write of the cell would have
// left, then the Notified hook. at, the snapshot the cells were read in,
// is below that start timestamp, so every run the notifications cause
// sees what was read.
func (db *DB) Renotify(ctx context.Context, at uint64, rows []engine.NotifiedRow) (int, error) {
	cells := 0
	for chunk := range slices.Chunk(rows, renotifyBatch) {
		err := db.transact(ctx, engine.TxnOptions{}, func(_ context.Context, etx engine.Txn) error {
			tx := etx.(*Txn)
			for _, r := range chunk {
				for _, c := range r.Columns {
					if err := engine.ValidateKey("Renotify", r.Table, r.Row, c); err != nil {
						return err
					}
					if err := tx.notify(r.Table, r.Row, c); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return cells, fmt.Errorf("notify: renotify: %w", err)
		}
		for _, r := range chunk {
			cells += len(r.Columns)
		}
	}
	return cells, nil
}

// renotifyBatch is how many rows one transaction of Renotify notifies.
const renotifyBatch = 256
