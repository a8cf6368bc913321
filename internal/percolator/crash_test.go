package percolator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/enginetest"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// TestPowerLossKeepsAcknowledgedCommits: only the commit point (and
// rollbacks) are synced; prewrites and secondary commits are not. That is
// safe because the store has one ordered log: a synced write makes every
// earlier write durable. The test cuts power (keeps only synced data, or a
// random part of the unsynced data on top) while transfers and injected
// crashes are under way and after they finish, reopens the store, and checks
// that the total is exact and every commit that was acknowledged survived.
func TestPowerLossKeepsAcknowledgedCommits(t *testing.T) {
	fs := vfs.NewCrashableMem()
	st, err := store.Open("", protocol.StoreOptions(&store.Options{FS: fs, Logger: quietLogger()}))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, st)
	e.clock.FollowWallClock(t) // crashed committers' locks expire on real time
	ctx := context.Background()
	const accounts, initial = 50, 100
	setup := e.db(t, "setup", nil)
	if err := setup.Update(ctx, func(ctx context.Context, tx *Txn) error {
		for i := range accounts {
			if err := tx.Set("bank", account(i), balance, []byte(strconv.Itoa(initial))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		acked []string // transfer ids whose Update returned nil
		wg    sync.WaitGroup
	)
	// The power is cut mid-flight: once cutAfter transfers are acknowledged,
	// the goroutine that acknowledged the last of them waits until the
	// clone is taken, so at least its remaining transfers are still to come.
	const cutAfter = 20
	cut, cutTaken := make(chan struct{}), make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db := e.db(t, fmt.Sprintf("g%d", g), func(o *Options) {
				o.LockTTL = 50 * time.Millisecond
				o.DisableOnePhase = true // the faults are two-phase steps
				o.Faults = func(CommitStep, uint64) error {
					if rand.N(15) == 0 {
						return errors.New("injected crash")
					}
					return nil
				}
			})
			for i := range 40 {
				id := fmt.Sprintf("g%d-%d", g, i)
				err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
					if err := tx.Set("log", []byte(id), balance, []byte("done")); err != nil {
						return err
					}
					return transfer(ctx, tx, accounts)
				})
				if err == nil {
					mu.Lock()
					acked = append(acked, id)
					n := len(acked)
					mu.Unlock()
					if n == cutAfter {
						close(cut)
						<-cutTaken
					}
				} else if !errors.Is(err, ErrCrashed) {
					t.Error(err)
					return
				}
			}
		}()
	}
	select {
	case <-cut:
	case <-done(&wg):
		t.Fatalf("fewer than %d transfers committed; no mid-flight power cut", cutAfter)
	}
	midFlight := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(1, 1))})
	mu.Lock()
	ackedAtCut := append([]string(nil), acked...)
	mu.Unlock()
	close(cutTaken)
	wg.Wait()
	mu.Lock()
	ackedAtEnd := append([]string(nil), acked...)
	mu.Unlock()

	check := func(name string, clone *vfs.MemFS, mustHave []string) {
		t.Run(name, func(t *testing.T) {
			st2, err := store.Open("", protocol.StoreOptions(&store.Options{FS: clone, Logger: quietLogger()}))
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			// The oracle survives: it persists its own state.
			e2 := &env{st: st2, or: e.or, srv: e.srv, clock: e.clock, live: &enginetest.Liveness{}}
			e2.live.OnlyAlive("after-restart") // every process died with the power
			db := e2.db(t, "after-restart", nil)
			total, err := sumAccounts(ctx, db, accounts)
			if err != nil {
				t.Fatal(err)
			}
			if total != accounts*initial {
				t.Errorf("total %d after power loss, want %d", total, accounts*initial)
			}
			err = db.View(ctx, func(ctx context.Context, tx *Txn) error {
				for _, id := range mustHave {
					if _, err := tx.Get(ctx, "log", []byte(id), balance); err != nil {
						return fmt.Errorf("acknowledged transfer %s lost: %w", id, err)
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			checkNoSplitTransactions(t, st2, "bank")
		})
	}
	check("mid-flight", midFlight, ackedAtCut)
	check("synced-only", fs.CrashClone(vfs.CrashCloneCfg{}), ackedAtEnd)
	check("some-unsynced", fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(2, 2))}), ackedAtEnd)
	if len(ackedAtEnd) == 0 {
		t.Fatal("no transfer committed; the test checked nothing")
	}
	st.Close()
}

// done returns a channel closed when wg is done.
func done(wg *sync.WaitGroup) <-chan struct{} {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	return c
}

func sumAccounts(ctx context.Context, db *DB, accounts int) (int, error) {
	total := 0
	err := db.View(ctx, func(ctx context.Context, tx *Txn) error {
		total = 0
		for i := range accounts {
			v, err := getInt(ctx, tx, account(i))
			if err != nil {
				return err
			}
			total += v
		}
		return nil
	})
	return total, err
}

// TestCommitPointAfterRollback: a committer that was judged dead and rolled
// back by a reader between its prewrite and its commit point must not
// commit: the commit point finds its lock gone, reports ErrAborted (a
// conflict, so Update would retry), and cleans up its secondaries.
func TestCommitPointAfterRollback(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	reader := e.db(t, "reader", nil)
	var readerErr error
	committer := e.db(t, "committer", func(o *Options) {
		o.DisableOnePhase = true // the faults are two-phase steps
		o.Faults = func(step CommitStep, _ uint64) error {
			if step == StepPrewritten {
				e.live.Kill("committer") // a partition makes it look dead
				readerErr = reader.View(ctx, func(ctx context.Context, tx *Txn) error {
					_, err := tx.Get(ctx, "t", []byte("a"), balance)
					if errors.Is(err, ErrNotFound) {
						return nil
					}
					return fmt.Errorf("reader saw %v, want the rolled-back write to be invisible", err)
				})
			}
			return nil
		}
	})
	tx, err := committer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"a", "b", "c"} {
		if err := tx.Set("t", []byte(r), balance, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	err = tx.Commit(ctx)
	if readerErr != nil {
		t.Fatal(readerErr)
	}
	if !errors.Is(err, ErrAborted) || !errors.Is(err, ErrConflict) {
		t.Fatalf("commit after rollback: %v, want ErrAborted", err)
	}
	for c, err := range e.st.Scan(ctx, store.ScanRequest{Table: "t"}) {
		if err != nil {
			t.Fatal(err)
		}
		if kind, _ := protocol.Untag(c.Ts); kind == protocol.KindLock || kind == protocol.KindWrite {
			t.Errorf("row %s: %s record left behind by an aborted transaction", c.Row, kind)
		}
	}
}

// TestHeartbeatKeepsLongCommitAlive: a commit that takes longer than the
// lock TTL keeps its primary lock fresh, so a reader waits for it instead of
// rolling it back; the commit then succeeds.
func TestHeartbeatKeepsLongCommitAlive(t *testing.T) {
	e := newEnv(t)
	e.clock.FollowWallClock(t)
	ctx := context.Background()
	release := make(chan struct{})
	paused := make(chan struct{})
	committer := e.db(t, "slow", func(o *Options) {
		o.LockTTL, o.HeartbeatInterval = 200*time.Millisecond, 20*time.Millisecond
		o.DisableOnePhase = true // the faults are two-phase steps
		o.Faults = func(step CommitStep, _ uint64) error {
			if step == StepPrewritten {
				close(paused)
				<-release
			}
			return nil
		}
	})
	done := make(chan error, 1)
	go func() {
		done <- committer.Update(ctx, func(ctx context.Context, tx *Txn) error {
			if err := tx.Set("t", []byte("a"), balance, []byte("1")); err != nil {
				return err
			}
			return tx.Set("t", []byte("b"), balance, []byte("2"))
		})
	}()
	<-paused
	reader := e.db(t, "reader", nil)
	// Several TTLs pass while the reader keeps meeting the lock.
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	err := reader.View(rctx, func(ctx context.Context, tx *Txn) error {
		_, err := tx.Get(ctx, "t", []byte("b"), balance)
		return err
	})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reader: %v; want it to keep waiting for the live commit", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("long commit: %v", err)
	}
	if n := reader.Stats().PrimaryAborted.Load(); n != 0 {
		t.Fatalf("reader rolled back %d primaries of a live commit", n)
	}
}

// TestSafePointSurvivesReopen: the GC safe point is persisted, so after a
// restart a transaction below it still fails instead of reading a
// half-collected snapshot.
func TestSafePointSurvivesReopen(t *testing.T) {
	fs := vfs.NewMem()
	st, err := store.Open("", protocol.StoreOptions(&store.Options{FS: fs, Logger: quietLogger()}))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, st)
	ctx := context.Background()
	db := e.db(t, "w", nil)
	var old uint64
	for i := range 3 {
		if err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
			if i == 0 {
				old = tx.StartTs()
			}
			return tx.Set("t", []byte("r"), balance, []byte(strconv.Itoa(i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	gs, err := db.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if gs.Deleted != 2 {
		t.Errorf("GC deleted %d versions, want the 2 superseded ones", gs.Deleted)
	}
	st.Close()
	st2, err := store.Open("", protocol.StoreOptions(&store.Options{FS: fs, Logger: quietLogger()}))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	db2, err := New(st2, e.or, &Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if db2.SafePoint() != gs.SafePoint {
		t.Fatalf("safe point after reopen %d, want %d", db2.SafePoint(), gs.SafePoint)
	}
	if _, err := db2.BeginAt(old); !errors.Is(err, ErrSnapshotTooOld) {
		t.Fatalf("BeginAt below the safe point after reopen: %v", err)
	}
}

// TestSafePointNeverMovesBack: two processes sharing a store collect with
// different safe points, the lower one last. The stored safe point stays
// the higher one (versions below it are gone), and the process that
// collected lower adopts it: its transactions below it fail instead of
// reading a snapshot the other collection deleted from.
func TestSafePointNeverMovesBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.db(t, "a", nil), e.db(t, "b", nil)
	var low uint64
	for i := range 3 {
		if err := a.Update(ctx, func(ctx context.Context, tx *Txn) error {
			if i == 1 {
				low = tx.StartTs()
			}
			return tx.Set("t", []byte("r"), balance, []byte(strconv.Itoa(i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	old, err := b.BeginAt(low)
	if err != nil {
		t.Fatal(err)
	}
	high, err := a.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if high.SafePoint <= low {
		t.Fatalf("first collection's safe point %d, want above %d", high.SafePoint, low)
	}
	if _, err := b.GC(ctx, low); err != nil {
		t.Fatal(err)
	}
	if sp, err := loadSafePoint(ctx, e.st); err != nil || sp != high.SafePoint {
		t.Fatalf("stored safe point %d (%v) after a lower collection, want %d", sp, err, high.SafePoint)
	}
	if b.SafePoint() != high.SafePoint {
		t.Fatalf("b's safe point %d, want the stored %d", b.SafePoint(), high.SafePoint)
	}
	if _, err := old.Get(ctx, "t", []byte("r"), balance); !errors.Is(err, ErrSnapshotTooOld) {
		t.Fatalf("read of a transaction below the adopted safe point: %v, want ErrSnapshotTooOld", err)
	}
	old.discard()
}

// racingSafePoint is a store on which another collection stores the safe
// point competing right before this one's first conditional write of it.
type racingSafePoint struct {
	store.Store
	competing uint64
	raced     bool
}

func (r *racingSafePoint) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	if txn.Table == protocol.MetaTable && len(txn.Checks) > 0 && !r.raced {
		r.raced = true
		if _, err := r.Store.Apply(ctx, &store.RowTxn{Table: txn.Table, Row: txn.Row, Mutations: []store.Mutation{
			{Column: safePointColumn, Ts: 0, Value: binary.BigEndian.AppendUint64(nil, r.competing)},
		}}); err != nil {
			return store.RowResult{}, err
		}
	}
	return r.Store.Apply(ctx, txn)
}

// TestSafePointStoreRacesEndHigh: a collection whose compare-and-swap of
// the safe point loses to another one looks again: it keeps the other's
// if that is higher (and adopts it), and stores its own over a lower one.
func TestSafePointStoreRacesEndHigh(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		competing  int64 // relative to this collection's safe point
		wantStored int64
	}{
		{"higher wins", +1000, +1000},
		{"lower loses", -10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ts, err := e.or.Timestamp(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sp := ts + 100_000
			st := &racingSafePoint{Store: e.st, competing: uint64(int64(sp) + tc.competing)}
			db, err := New(st, e.or, &Options{WorkerID: "gc", Liveness: e.live, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.GC(ctx, sp); err != nil {
				t.Fatal(err)
			}
			want := uint64(int64(sp) + tc.wantStored)
			if !st.raced {
				t.Fatal("the competing collection never ran")
			}
			if got, err := loadSafePoint(ctx, e.st); err != nil || got != want {
				t.Fatalf("stored safe point %d (%v), want %d", got, err, want)
			}
			if db.SafePoint() != want {
				t.Fatalf("the collector's safe point %d, want %d", db.SafePoint(), want)
			}
		})
	}
}
