package percolator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

var balance = Column{Family: "bal", Qualifier: "v"}

func account(i int) []byte { return []byte(fmt.Sprintf("acct%05d", i)) }

// TestBank is the classic snapshot-isolation check under faults: transfers
// between accounts never create or destroy money, whatever step of the
// commit protocol the committing "process" dies at, and every read-only
// snapshot sees the exact total while transfers and crash recovery run.
//
// Each transfer goroutine plays a process with its own DB and worker id.
// Its commits crash at random protocol steps; a crashed process is replaced
// by a new one. Half of the crashed processes are reported dead by the
// liveness service (their locks are resolved at once), the other half are
// left to their lock TTL.
func TestBank(t *testing.T) {
	transfers := 60
	if testing.Short() {
		transfers = 20
	}
	runBank(t, newEnv(t), bankRun{workers: 16, transfers: transfers, crashOneIn: 40})
}

// TestBankOnePhase is TestBank with half of the processes committing in
// one phase (every cell written as committed in one atomic store write at
// a commit timestamp the store draws) and half in two, on the same accounts: a
// one-phase commit must meet the other half's locks, its writes must stop
// their prewrites, and no snapshot may see half of either kind.
func TestBankOnePhase(t *testing.T) {
	transfers := 60
	if testing.Short() {
		transfers = 20
	}
	runBank(t, newEnv(t), bankRun{workers: 16, transfers: transfers, crashOneIn: 40, onePhase: true})
}

// TestBankWhileCollecting is TestBankOnePhase with garbage collection
// running all along, as a runner's owner runs it: a safe point a lag
// behind now, lowered to the oldest transaction of every process. Rule:
// a collection (its lock resolution, deletions and compactions) never
// changes what a snapshot at or above its safe point reads, nor what a
// transaction running above it commits.
func TestBankWhileCollecting(t *testing.T) {
	transfers := 60
	if testing.Short() {
		transfers = 20
	}
	runBank(t, newEnv(t), bankRun{workers: 16, transfers: transfers, crashOneIn: 40, onePhase: true, collect: true})
}

// bankRun sizes a bank test: workers each make transfers transfers, and
// each commit step crashes one time in crashOneIn. Its processes commit
// in two phases, or with onePhase the even ones in one phase where the
// store and oracle allow it. With collect, a collector process collects
// garbage until the transfers end.
type bankRun struct {
	workers, transfers, crashOneIn int
	onePhase, collect              bool
}

// bankGCLag is how far behind now a bank collector's safe point stays:
// long enough that a transaction that drew its start timestamp before
// the safe point has entered its process's running set when the
// collector looks (a runner's -gc-lag and liveness refresh, shortened).
const bankGCLag = 100 * time.Millisecond

// bankProcesses are the DBs of a bank test, whose oldest running
// transactions hold its collector's safe point back.
type bankProcesses struct {
	mu  sync.Mutex
	dbs []*DB
}

func (p *bankProcesses) add(db *DB) *DB {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dbs = append(p.dbs, db)
	return db
}

// safePoint returns sp lowered to the oldest transaction running in any
// of the processes.
func (p *bankProcesses) safePoint(sp uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, db := range p.dbs {
		if o := db.OldestActive(); o != 0 && o < sp {
			sp = o
		}
	}
	return sp
}

// collect runs collections every few milliseconds until stop is closed,
// counting them in rounds and those that compacted a table in compacted.
// The first error goes to errs.
func (p *bankProcesses) collect(ctx context.Context, e *env, collector *DB, stop <-chan struct{}, errs chan<- error, rounds, compacted *atomic.Int64) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		now, err := e.or.Timestamp(ctx)
		if err != nil {
			errs <- err
			return
		}
		time.Sleep(bankGCLag)
		sp := p.safePoint(oracle.Compose(oracle.PhysicalMillis(now)-bankGCLag.Milliseconds(), 0))
		st, err := collector.GC(ctx, sp)
		if err != nil {
			errs <- fmt.Errorf("collecting at %d: %w", sp, err)
			return
		}
		rounds.Add(1)
		if len(st.Compacted) > 0 {
			compacted.Add(1)
		}
	}
}

// runBank runs the bank test on e.
func runBank(t *testing.T, e *env, run bankRun) {
	accounts, workers, transfers := 1000, run.workers, run.transfers
	const initial = 1000
	e.clock.FollowWallClock(t) // the TTL path runs on real time
	ctx := context.Background()

	setup := e.db(t, "setup", nil)
	for lo := 0; lo < accounts; lo += 100 {
		err := setup.Update(ctx, func(ctx context.Context, tx *Txn) error {
			for i := lo; i < lo+100; i++ {
				if err := tx.Set("bank", account(i), balance, []byte(strconv.Itoa(initial))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	want := accounts * initial

	var (
		crashes    [StepOnePhaseCommitted + 1]atomic.Int64
		committed  atomic.Int64
		snapshots  atomic.Int64
		stop       = make(chan struct{})
		readerErrs = make(chan error, 4)
		wg, rwg    sync.WaitGroup
	)
	var (
		procs             bankProcesses
		rounds, compacted atomic.Int64
	)
	if run.collect {
		collector := e.db(t, "collector", nil)
		rwg.Go(func() { procs.collect(ctx, e, collector, stop, readerErrs, &rounds, &compacted) })
	}
	newProcess := func(g, gen int) *DB {
		return procs.add(e.db(t, fmt.Sprintf("g%d-gen%d", g, gen), func(o *Options) {
			o.LockTTL = 300 * time.Millisecond
			o.DisableOnePhase = !run.onePhase || g%2 == 1
			o.Faults = func(step CommitStep, _ uint64) error {
				if rand.N(run.crashOneIn) == 0 {
					crashes[step].Add(1)
					return errors.New("injected crash")
				}
				return nil
			}
		}))
	}
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen := 0
			db := newProcess(g, gen)
			// Up to four times as many transfers while some step has not
			// crashed yet, or no collection compacted yet: the crashes
			// are random, and a run with none at a step would not test
			// it; collections run every few milliseconds.
			for i := 0; i < transfers || i < 4*transfers && (!everyStepCrashed(&crashes, run.onePhase) || run.collect && compacted.Load() == 0); i++ {
				err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
					return transfer(ctx, tx, accounts)
				})
				switch {
				case err == nil:
					committed.Add(1)
				case errors.Is(err, ErrCrashed):
					if gen%2 == 0 {
						e.live.Kill(db.Options().WorkerID)
					}
					gen++
					db = newProcess(g, gen)
				default:
					t.Errorf("transfer: %v", err)
					return
				}
			}
		}()
	}
	for r := range 2 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			reader := procs.add(e.db(t, fmt.Sprintf("reader%d", r), nil))
			for {
				select {
				case <-stop:
					return
				default:
				}
				total, err := sumBalances(ctx, reader, r == 0)
				if err != nil {
					readerErrs <- err
					return
				}
				if total != want {
					readerErrs <- fmt.Errorf("snapshot total %d, want %d", total, want)
					return
				}
				snapshots.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(readerErrs)
	for err := range readerErrs {
		t.Error(err)
	}

	final := e.db(t, "final", nil)
	total, err := sumBalances(ctx, final, true)
	if err != nil {
		t.Fatal(err)
	}
	if total != want {
		t.Fatalf("final total %d, want %d", total, want)
	}
	t.Logf("%d transfers committed, %d snapshots checked, crashes by step: %v", committed.Load(), snapshots.Load(), crashCounts(&crashes))
	if run.collect {
		t.Logf("%d collections, %d of them compacted", rounds.Load(), compacted.Load())
		if compacted.Load() == 0 && !testing.Short() {
			t.Error("no collection compacted the bank: the test did not exercise compactions under load")
		}
	}
	for step := StepPrimaryPrewritten; step <= lastStep(run.onePhase); step++ {
		if crashes[step].Load() == 0 && !testing.Short() {
			t.Errorf("no crash was injected at %s; the test did not exercise it", step)
		}
	}
	checkNoSplitTransactions(t, e.st, "bank")
}

// lastStep is the last commit step a bank run crashes at.
func lastStep(onePhase bool) CommitStep {
	if onePhase {
		return StepOnePhaseCommitted
	}
	return StepSecondaryCommitted
}

// everyStepCrashed reports whether a crash was injected at every step a
// bank run crashes at.
func everyStepCrashed(c *[StepOnePhaseCommitted + 1]atomic.Int64, onePhase bool) bool {
	for step := StepPrimaryPrewritten; step <= lastStep(onePhase); step++ {
		if c[step].Load() == 0 {
			return false
		}
	}
	return true
}

func crashCounts(c *[StepOnePhaseCommitted + 1]atomic.Int64) map[string]int64 {
	m := map[string]int64{}
	for step := StepPrimaryPrewritten; step <= StepOnePhaseCommitted; step++ {
		m[step.String()] = c[step].Load()
	}
	return m
}

// transfer moves money from one account to one to three others, so that
// commits have several secondaries to crash between.
func transfer(ctx context.Context, tx *Txn, accounts int) error {
	from := rand.N(accounts)
	fromBal, err := getInt(ctx, tx, account(from))
	if err != nil {
		return err
	}
	n := 1 + rand.N(3)
	for range n {
		to := rand.N(accounts)
		if to == from {
			continue
		}
		amount := rand.N(20)
		if amount > fromBal {
			break
		}
		toBal, err := getInt(ctx, tx, account(to))
		if err != nil {
			return err
		}
		fromBal -= amount
		if err := tx.Set("bank", account(to), balance, []byte(strconv.Itoa(toBal+amount))); err != nil {
			return err
		}
	}
	return tx.Set("bank", account(from), balance, []byte(strconv.Itoa(fromBal)))
}

func getInt(ctx context.Context, tx *Txn, row []byte) (int, error) {
	v, err := tx.Get(ctx, "bank", row, balance)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

// sumBalances adds up every account in one snapshot, by scan or by point
// reads.
func sumBalances(ctx context.Context, db *DB, byScan bool) (int, error) {
	total := 0
	err := db.View(ctx, func(ctx context.Context, tx *Txn) error {
		total = 0
		if byScan {
			for e, err := range tx.Scan(ctx, ScanOptions{Table: "bank"}) {
				if err != nil {
					return err
				}
				v, err := strconv.Atoi(string(e.Value))
				if err != nil {
					return err
				}
				total += v
			}
			return nil
		}
		for i := range 1000 {
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

// checkNoSplitTransactions asserts that no transaction both committed some
// cell and was rolled back on another: every start timestamp has write
// records or rollback records, never both.
func checkNoSplitTransactions(t *testing.T, st store.Store, table string) {
	t.Helper()
	committedAt := map[uint64]bool{}
	rolledBack := map[uint64]bool{}
	for c, err := range st.Scan(context.Background(), store.ScanRequest{Table: table}) {
		if err != nil {
			t.Fatal(err)
		}
		kind, ts := protocol.Untag(c.Ts)
		switch kind {
		case protocol.KindWrite:
			w, err := protocol.DecodeWrite(c.Value)
			if err != nil {
				t.Fatal(err)
			}
			committedAt[w.StartTs] = true
		case protocol.KindRollback:
			rolledBack[ts] = true
		}
	}
	for ts := range rolledBack {
		if committedAt[ts] {
			t.Errorf("transaction %d committed some cells and was rolled back on others", ts)
		}
	}
}

// TestLostUpdate: concurrent read-modify-write increments through Update
// never lose an increment, because a conflicting attempt is re-run from the
// start at a new timestamp (re-reading the counter), never re-applied.
func TestLostUpdate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const goroutines, increments = 8, 25
	var calls atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db := e.db(t, fmt.Sprintf("w%d", g), nil)
			for range increments {
				err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
					calls.Add(1)
					n := 0
					v, err := tx.Get(ctx, "ctr", []byte("c"), balance)
					if err == nil {
						n, _ = strconv.Atoi(string(v))
					} else if !errors.Is(err, ErrNotFound) {
						return err
					}
					return tx.Set("ctr", []byte("c"), balance, []byte(strconv.Itoa(n+1)))
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var got []byte
	err := e.db(t, "check", nil).View(ctx, func(ctx context.Context, tx *Txn) (err error) {
		got, err = tx.Get(ctx, "ctr", []byte("c"), balance)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(goroutines * increments); string(got) != want {
		t.Fatalf("counter = %s, want %s", got, want)
	}
	t.Logf("%d increments took %d attempts", goroutines*increments, calls.Load())
}
