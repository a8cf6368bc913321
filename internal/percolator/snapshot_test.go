package percolator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/remote/remotetest"
	"github.com/trickle-dev/trickle/store"
)

// The rules a snapshot chosen by the store (see store.TimestampReader) must keep, as
// one drawn from the oracle keeps them.

// countingOracle counts the timestamps a DB draws itself.
type countingOracle struct {
	Oracle
	n      atomic.Int64
	down   atomic.Bool        // fail every draw
	failOn func(n int64) bool // if set, fail the draws it names (1-based)
}

func (o *countingOracle) Timestamp(ctx context.Context) (uint64, error) {
	n := o.n.Add(1)
	if o.down.Load() || o.failOn != nil && o.failOn(n) {
		return 0, errOracleDown
	}
	return o.Oracle.Timestamp(ctx)
}

var errOracleDown = errors.New("oracle down (test)")

// nowEnv is an env whose store is served over NATS by a service that
// draws reads' timestamps from the env's oracle server (withOracle), or
// that cannot (without), with DBs on the served store.
type nowEnv struct {
	*env
	remote store.Store
	or     *countingOracle
}

func newNowEnv(t *testing.T, withOracle bool) *nowEnv {
	e := newEnv(t)
	e.clock.FollowWallClock(t)
	var or oracle.Reserver // nil: the service cannot draw timestamps
	if withOracle {
		or = e.srv
	}
	d := remotetest.Serve(t, e.st, or)
	return &nowEnv{env: e, remote: d.Store, or: &countingOracle{Oracle: e.or}}
}

// db opens a DB over the served store that draws its own timestamps
// through n.or.
func (n *nowEnv) db(t *testing.T, id string) *DB {
	t.Helper()
	return n.dbOver(t, n.remote, id, nil)
}

// dbOver opens a DB over st (the served store, or a view of it) that
// draws its own timestamps through n.or, with options tweaked by tweak if
// not nil.
func (n *nowEnv) dbOver(t *testing.T, st store.Store, id string, tweak func(*Options)) *DB {
	t.Helper()
	o := &Options{WorkerID: id, Liveness: n.live, Logger: quietLogger()}
	if tweak != nil {
		tweak(o)
	}
	db, err := New(st, n.or, o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func set(t *testing.T, db *DB, kv ...string) {
	t.Helper()
	if err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		for i := 0; i < len(kv); i += 2 {
			if err := tx.Set("t", []byte(kv[i]), col("v"), []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func col(q string) Column { return Column{Family: "f", Qualifier: q} }

// viewGet reads cell (t, row, c) in a View of db.
func viewGet(db *DB, row string, c Column) (string, error) {
	var v []byte
	err := db.View(context.Background(), func(ctx context.Context, tx *Txn) (err error) {
		v, err = tx.Get(ctx, "t", []byte(row), c)
		return err
	})
	return string(v), err
}

// A read-only transaction whose snapshot the store chooses sees every
// commit that completed before it began (its start timestamp is later than
// their commit timestamps), and draws no timestamp itself.
func TestStoreChosenSnapshotSeesEveryEarlierCommit(t *testing.T) {
	n := newNowEnv(t, true)
	writer, reader := n.db(t, "writer"), n.db(t, "reader")
	ctx := context.Background()
	for i := range 20 {
		want := fmt.Sprint(i)
		set(t, writer, "a", want)
		drawn := n.or.n.Load()
		var start uint64
		if err := reader.View(ctx, func(ctx context.Context, tx *Txn) error {
			v, err := tx.Get(ctx, "t", []byte("a"), col("v"))
			if err != nil {
				return err
			}
			if string(v) != want {
				return fmt.Errorf("read %q after the commit of %q", v, want)
			}
			start = tx.StartTs()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if d := n.or.n.Load() - drawn; d != 0 {
			t.Fatalf("round %d: the view drew %d timestamps, want 0 (its snapshot is the store's)", i, d)
		}
		if start <= writer.seenTs.Load() { // the writer's commit timestamp
			t.Fatalf("round %d: snapshot %d not after the writer's commit %d", i, start, writer.seenTs.Load())
		}
	}
}

// After the first read chose the snapshot, later reads stay in it: a
// commit in between is not seen, by Get, GetRows or Scan.
func TestStoreChosenSnapshotHoldsForLaterReads(t *testing.T) {
	n := newNowEnv(t, true)
	writer, reader := n.db(t, "writer"), n.db(t, "reader")
	set(t, writer, "a", "1", "b", "1")
	ctx := context.Background()
	if err := reader.View(ctx, func(ctx context.Context, tx *Txn) error {
		if v, err := tx.Get(ctx, "t", []byte("a"), col("v")); err != nil || string(v) != "1" {
			return fmt.Errorf("first read: %q, %v", v, err)
		}
		set(t, writer, "a", "2", "b", "2")
		if v, err := tx.Get(ctx, "t", []byte("b"), col("v")); err != nil || string(v) != "1" {
			return fmt.Errorf("Get after a later commit: %q, %v; want the snapshot's 1", v, err)
		}
		rows, err := tx.GetRows(ctx, "t", [][]byte{[]byte("a"), []byte("b")}, []Column{col("v")})
		if err != nil {
			return err
		}
		if string(rows["a"][col("v")]) != "1" || string(rows["b"][col("v")]) != "1" {
			return fmt.Errorf("GetRows after a later commit: %q", rows)
		}
		for e, err := range tx.Scan(ctx, ScanOptions{Table: "t"}) {
			if err != nil {
				return err
			}
			if string(e.Value) != "1" {
				return fmt.Errorf("Scan after a later commit: %s = %q", e.Row, e.Value)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// GetRows and Scan as a transaction's first read choose its snapshot too:
// GetRows in the store, Scan from the oracle.
func TestStoreChosenSnapshotByGetRowsAndScan(t *testing.T) {
	n := newNowEnv(t, true)
	writer, reader := n.db(t, "writer"), n.db(t, "reader")
	set(t, writer, "a", "1", "b", "1")
	ctx := context.Background()
	drawn := n.or.n.Load()
	if err := reader.View(ctx, func(ctx context.Context, tx *Txn) error {
		rows, err := tx.GetRows(ctx, "t", [][]byte{[]byte("a"), []byte("b")}, []Column{col("v")})
		if err != nil || len(rows) != 2 {
			return fmt.Errorf("GetRows: %q, %v", rows, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if d := n.or.n.Load() - drawn; d != 0 {
		t.Fatalf("GetRows first: %d timestamps drawn, want 0", d)
	}
	if err := reader.View(ctx, func(ctx context.Context, tx *Txn) error {
		var got int
		for _, err := range tx.Scan(ctx, ScanOptions{Table: "t"}) {
			if err != nil {
				return err
			}
			got++
		}
		if got != 2 {
			return fmt.Errorf("Scan found %d cells, want 2", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if d := n.or.n.Load() - drawn; d != 1 {
		t.Fatalf("Scan first: %d timestamps drawn, want 1", d)
	}
}

// Until its first read, a transaction whose snapshot the store will choose
// holds the safe point at a floor below any timestamp it can get, so a
// garbage collection cannot pass its snapshot; once it ended the safe
// point moves on.
func TestStoreChosenSnapshotIsNeverBelowTheSafePoint(t *testing.T) {
	n := newNowEnv(t, true)
	writer, reader := n.db(t, "writer"), n.db(t, "reader")
	set(t, writer, "a", "1")
	set(t, reader, "b", "1") // the reader has seen timestamps
	ctx := context.Background()
	const far = uint64(1) << 60
	if err := reader.View(ctx, func(ctx context.Context, tx *Txn) error {
		floor := reader.seenTs.Load()
		if sp := reader.active.raise(far); sp > floor {
			return fmt.Errorf("safe point raised to %d past the unread transaction's floor %d", sp, floor)
		}
		v, err := tx.Get(ctx, "t", []byte("a"), col("v"))
		if err != nil || string(v) != "1" {
			return fmt.Errorf("read after the collection: %q, %v", v, err)
		}
		if tx.StartTs() < reader.SafePoint() {
			return fmt.Errorf("snapshot %d below the safe point %d", tx.StartTs(), reader.SafePoint())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if sp := reader.active.raise(far); sp != far {
		t.Fatalf("safe point %d after the transaction ended, want %d", sp, far)
	}
}

// A process that has drawn no timestamp yet, on a store never collected,
// still shows its unread transaction to the other processes' garbage
// collection: OldestActive's 0 would say it runs none.
func TestStoreChosenSnapshotOfAFreshProcessIsShown(t *testing.T) {
	n := newNowEnv(t, true)
	reader := n.db(t, "reader")
	if err := reader.View(context.Background(), func(ctx context.Context, tx *Txn) error {
		if old := reader.OldestActive(); old == 0 {
			return fmt.Errorf("OldestActive = 0 (none) while a transaction runs")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The floor rises with the transactions that run, so that a stream of
// reads does not hold the safe point where it was.
func TestStoreChosenSnapshotFloorRises(t *testing.T) {
	n := newNowEnv(t, true)
	writer, reader := n.db(t, "writer"), n.db(t, "reader")
	set(t, writer, "a", "1")
	ctx := context.Background()
	var last uint64
	for range 3 {
		if err := reader.View(ctx, func(ctx context.Context, tx *Txn) error {
			if old := reader.OldestActive(); old < last {
				return fmt.Errorf("registered at %d, below the previous snapshot %d", old, last)
			}
			_, err := tx.Get(ctx, "t", []byte("a"), col("v"))
			last = tx.StartTs()
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// A lock met by the read that chose the snapshot is resolved as any
// read's: a transaction that reached its commit point and crashed before
// committing the secondary is rolled forward, and its value read.
func TestStoreChosenSnapshotResolvesLocks(t *testing.T) {
	n := newNowEnv(t, true)
	crash := errors.New("crash")
	writer := n.dbOver(t, n.remote, "writer", func(o *Options) {
		o.DisableOnePhase = true // the faults are two-phase steps
		o.Faults = func(step CommitStep, _ uint64) error {
			if step == StepCommitted {
				return crash
			}
			return nil
		}
	})
	err := writer.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		if err := tx.Set("t", []byte("a"), col("v"), []byte("primary")); err != nil {
			return err
		}
		return tx.Set("t", []byte("b"), col("v"), []byte("secondary"))
	})
	if !errors.Is(err, crash) {
		t.Fatalf("commit: %v, want the injected crash", err)
	}
	reader := n.db(t, "reader")
	if v, err := viewGet(reader, "b", col("v")); err != nil || v != "secondary" {
		t.Fatalf("read of the locked secondary: %q, %v", v, err)
	}
	if reader.Stats().RolledForward.Load() == 0 {
		t.Fatal("the secondary's lock was not rolled forward by the reader")
	}
}

// A store that cannot choose the timestamp leaves it to the transaction,
// which draws it from the oracle and reads as usual.
func TestSnapshotFromTheOracleWhenTheStoreCannotChoose(t *testing.T) {
	n := newNowEnv(t, false)
	writer, reader := n.db(t, "writer"), n.db(t, "reader")
	ctx := context.Background()
	for i := range 3 {
		set(t, writer, "a", fmt.Sprint(i))
		drawn := n.or.n.Load()
		if err := reader.View(ctx, func(ctx context.Context, tx *Txn) error {
			v, err := tx.Get(ctx, "t", []byte("a"), col("v"))
			if err != nil || string(v) != fmt.Sprint(i) {
				return fmt.Errorf("read %q, %v; want %d", v, err, i)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if d := n.or.n.Load() - drawn; d != 1 {
			t.Fatalf("round %d: %d timestamps drawn for the view, want 1", i, d)
		}
	}
}

// The bank test with every transaction's snapshot chosen by the store
// (its first read's): transfers that read both accounts and write both,
// crashing at every step of the commit protocol, never create or destroy
// money, and every snapshot sees the exact total. Half of the processes
// commit in one phase through the service (ApplyAtomic).
func TestBankWithSnapshotsChosenByTheStore(t *testing.T) {
	e := newEnv(t)
	d := remotetest.Serve(t, e.st, e.srv)
	e.st = d.Store
	runBank(t, e, bankRun{workers: 8, transfers: 40, crashOneIn: 20, onePhase: true})
}

// A transaction that writes without reading has no snapshot until it
// commits, and then draws it from the oracle: a lost update is still a
// conflict. Two read-modify-writes of one cell whose snapshots the store
// chose before either commits cannot both commit.
func TestStoreChosenSnapshotsConflictAsAny(t *testing.T) {
	n := newNowEnv(t, true)
	a, b := n.db(t, "a"), n.db(t, "b")
	ctx := context.Background()
	set(t, a, "x", "0") // writes without reading
	drawn := n.or.n.Load()
	ta, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ta.Rollback()
	var tb *Txn
	errB := b.Update(ctx, func(ctx context.Context, tx *Txn) error {
		if _, err := tx.Get(ctx, "t", []byte("x"), col("v")); err != nil {
			return err
		}
		if tb == nil { // the first attempt reads, then lets a commit first
			tb = tx
			if _, err := ta.Get(ctx, "t", []byte("x"), col("v")); err != nil {
				return err
			}
			if err := ta.Set("t", []byte("x"), col("v"), []byte("a")); err != nil {
				return err
			}
			if err := ta.Commit(ctx); err != nil {
				return err
			}
		}
		return tx.Set("t", []byte("x"), col("v"), []byte("b"))
	})
	if errB != nil {
		t.Fatal(errB)
	}
	if s := b.Stats().Conflicts.Load(); s != 1 {
		t.Fatalf("%d conflicts for the read-modify-write that read before the other committed, want 1 (then a retry)", s)
	}
	// Only a's Begin drew a timestamp: b's snapshots were chosen by its
	// reads, and both commit timestamps by the store.
	if d := n.or.n.Load() - drawn; d != 1 {
		t.Fatalf("%d timestamps drawn, want 1 (a's start)", d)
	}
}

// A transaction whose StartTs could not be drawn returned 0, which its
// caller may have used (in a key, say): it fails from then on, even once
// the oracle is back, and writes nothing.
func TestStartTsThatCouldNotBeDrawnFailsTheTransaction(t *testing.T) {
	n := newNowEnv(t, true)
	db := n.db(t, "w")
	n.or.down.Store(true)
	err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		ts := tx.StartTs()
		n.or.down.Store(false)
		if ts != 0 {
			return fmt.Errorf("StartTs = %d with the oracle down, want 0", ts)
		}
		_ = tx.Set("t", []byte(fmt.Sprintf("%016x", ts)), col("v"), []byte("x"))
		if _, err := tx.Get(ctx, "t", []byte("a"), col("v")); !errors.Is(err, errOracleDown) {
			return fmt.Errorf("Get after the failed StartTs: %v, want the oracle's error", err)
		}
		return nil
	})
	if !errors.Is(err, errOracleDown) {
		t.Fatalf("Update: %v, want the oracle's error", err)
	}
	if _, err := viewGet(db, fmt.Sprintf("%016x", 0), col("v")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the cell keyed by the failed StartTs: %v, want not found", err)
	}
}

// lossyApplier applies a commit point through the store's ApplyNow and
// then loses the answer, as a connection dropped at the wrong moment does.
type lossyApplier struct{ store.Store }

func (l lossyApplier) ApplyNow(ctx context.Context, txn *store.RowTxn, rel uint64) (uint64, store.RowResult, error) {
	ts, res, err := l.Store.(store.TimestampApplier).ApplyNow(ctx, txn, rel)
	if err == nil {
		return 0, store.RowResult{FailedCheck: -1}, fmt.Errorf("answer lost (test): %w", store.ErrUnavailable)
	}
	return ts, res, err
}

// unsupportedApplier is a store that cannot choose a commit's timestamp.
type unsupportedApplier struct{ store.Store }

func (unsupportedApplier) ApplyNow(context.Context, *store.RowTxn, uint64) (uint64, store.RowResult, error) {
	return 0, store.RowResult{FailedCheck: -1}, fmt.Errorf("cannot (test): %w", errors.ErrUnsupported)
}

// A commit point whose timestamp the store chose and whose answer was
// lost has an unknown outcome for the committer, as any commit point whose
// answer is lost, and a reader finds it committed; a store that cannot
// choose leaves the commit timestamp to the oracle.
func TestStoreChosenCommitTimestamp(t *testing.T) {
	n := newNowEnv(t, true)
	db := n.dbOver(t, lossyApplier{n.remote}, "w", nil)
	err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		if _, err := tx.Get(ctx, "t", []byte("a"), col("v")); !errors.Is(err, ErrNotFound) {
			return err
		}
		return tx.Set("t", []byte("a"), col("v"), []byte("x"))
	})
	if !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("commit with its answer lost: %v, want ErrCommitUnknown", err)
	}
	reader := n.db(t, "reader")
	if v, err := viewGet(reader, "a", col("v")); err != nil || v != "x" {
		t.Fatalf("read after the lost answer: %q, %v; want the committed x", v, err)
	}

	plain := n.dbOver(t, unsupportedApplier{n.remote}, "p", nil)
	drawn := n.or.n.Load()
	if err := plain.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		return tx.Set("t", []byte("b"), colA, []byte("y"))
	}); err != nil {
		t.Fatal(err)
	}
	if d := n.or.n.Load() - drawn; d != 2 {
		t.Fatalf("a blind write on a store that cannot choose drew %d timestamps, want 2 (start and commit)", d)
	}
	if got := readString(t, reader, "b"); got != "y" {
		t.Fatalf("read %q after the fallback commit, want y", got)
	}
}

// undecidedStore can choose timestamps in principle but says it cannot
// now, as a runner's store does once the process owns the data.
type undecidedStore struct {
	store.Store
	t *testing.T
}

func (undecidedStore) ChoosesTimestamps() bool { return false }

func (u undecidedStore) ReadRowsNow(context.Context, []store.RowRead, uint64) (uint64, [][]store.Cell, error) {
	u.t.Error("ReadRowsNow called on a store that says it cannot choose timestamps now")
	return 0, nil, errors.ErrUnsupported
}

func (u undecidedStore) ApplyNow(context.Context, *store.RowTxn, uint64) (uint64, store.RowResult, error) {
	u.t.Error("ApplyNow called on a store that says it cannot choose timestamps now")
	return 0, store.RowResult{FailedCheck: -1}, errors.ErrUnsupported
}

// A store that says it cannot choose timestamps now gets transactions
// that start and commit the usual way, without trying.
func TestStoreThatCannotChooseNowIsNotAsked(t *testing.T) {
	n := newNowEnv(t, true)
	db := n.dbOver(t, undecidedStore{Store: n.remote, t: t}, "w", nil)
	drawn := n.or.n.Load()
	if err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		if _, err := tx.Get(ctx, "t", []byte("a"), colA); !errors.Is(err, ErrNotFound) {
			return err
		}
		return tx.Set("t", []byte("a"), colA, []byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, db, "a"); got != "x" {
		t.Fatalf("read %q, want x", got)
	}
	if d := n.or.n.Load() - drawn; d != 3 {
		t.Fatalf("%d timestamps drawn, want 3 (start and commit, the view's start)", d)
	}
}

// failingReserver is an oracle that fails while down is set.
type failingReserver struct {
	oracle.Reserver
	down atomic.Bool
}

func (f *failingReserver) Reserve(ctx context.Context, n int) (uint64, error) {
	if f.down.Load() {
		return 0, errOracleDown
	}
	return f.Reserver.Reserve(ctx, n)
}

// A commit whose timestamp the store service cannot draw fails with
// store.ErrNoTimestamp, not with an unknown outcome: the service says that
// nothing was applied. In two phases the committer then rolls its locks
// back itself; in one phase there are none. Nothing of it is ever seen,
// and no reader has anything to resolve.
func TestStoreCannotDrawTheCommitTimestamp(t *testing.T) {
	for _, mode := range []string{"two-phase", "one-phase"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			e.clock.FollowWallClock(t)
			svcOracle := &failingReserver{Reserver: e.srv}
			n := &nowEnv{env: e, remote: remotetest.Serve(t, e.st, svcOracle).Store, or: &countingOracle{Oracle: e.or}}
			writer := n.dbOver(t, n.remote, "writer", func(o *Options) { o.DisableOnePhase = mode == "two-phase" })
			err := writer.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
				if _, err := tx.Get(ctx, "t", []byte("a"), colA); !errors.Is(err, ErrNotFound) {
					return err
				}
				svcOracle.down.Store(true) // after the snapshot, before the commit
				return tx.Set("t", []byte("a"), colA, []byte("x"))
			})
			if !errors.Is(err, store.ErrNoTimestamp) || errors.Is(err, ErrCommitUnknown) || !strings.Contains(err.Error(), errOracleDown.Error()) {
				t.Fatalf("commit with the service's oracle down: %v, want store.ErrNoTimestamp carrying the oracle's error, not ErrCommitUnknown", err)
			}
			svcOracle.down.Store(false)
			if kinds := rawKinds(t, e); kinds[protocol.KindLock] != 0 || kinds[protocol.KindWrite] != 0 {
				t.Fatalf("records left by the failed commit: %v, want no lock and no write", kinds)
			}
			reader := n.db(t, "reader")
			if v, err := viewGet(reader, "a", colA); !errors.Is(err, ErrNotFound) {
				t.Fatalf("read after the failed commit: %q, %v; want not found", v, err)
			}
			if aborted := reader.Stats().PrimaryAborted.Load(); aborted != 0 {
				t.Fatalf("the reader rolled back %d primaries; the committer should have", aborted)
			}
		})
	}
}
