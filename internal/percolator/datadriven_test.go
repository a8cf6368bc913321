package percolator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/trickle-dev/trickle/internal/enginetest"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// TestProtocol runs the protocol scenarios in testdata/. Each file is a
// story told with these commands (keys are table/row/family:qualifier):
//
//	begin txn=T [worker=W] [at=txn:U] start T on worker W's DB (default w1),
//	                                at a fresh timestamp or at U's start
//	set txn=T key=K value=V         buffer a write
//	delete txn=T key=K              buffer a delete
//	get txn=T key=K [timeout=D]     read through T's snapshot
//	scan txn=T table=X [prefix=P] [start=S] [end=E] [families=a,b]
//	commit txn=T [crash=STEP]       commit; STEP stops it like a crash
//	rollback txn=T
//	late-prewrite txn=T key=K       a zombie T prewrites K after the fact
//	late-commit txn=T key=K         a zombie T tries its commit point on K
//	late-rollback txn=T key=K       a confused resolver rolls T back on K
//	kill worker=W                   liveness reports W dead
//	advance-clock dur=D             move the oracle's physical clock
//	dump table=X                    raw cells with protocol kinds
//	gc [upto=txn:T|now]             garbage-collect below T's start (or now)
func TestProtocol(t *testing.T) { runProtocol(t, newEnv) }

// runProtocol runs every scenario, each on an env newEnv makes.
func runProtocol(t *testing.T, newEnv func(testing.TB) *env) {
	datadriven.Walk(t, "testdata/protocol", func(t *testing.T, path string) {
		s := &scenario{e: newEnv(t), dbs: map[string]*DB{}, txns: map[string]*Txn{}, crashes: map[string]CommitStep{}, writes: map[string][]*mutation{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := s.run(t, d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

type scenario struct {
	e       *env
	dbs     map[string]*DB
	txns    map[string]*Txn
	crashes map[string]CommitStep // transaction name -> step its commit stops at
	// writes remembers each transaction's writes past its commit, for the
	// late-* commands that replay its protocol steps.
	writes map[string][]*mutation
}

func (s *scenario) worker(t *testing.T, id string) *DB {
	if id == "" {
		id = "w1"
	}
	if db, ok := s.dbs[id]; ok {
		return db
	}
	db := s.e.db(t, id, func(o *Options) {
		// A read that must wait for a live lock makes exactly one
		// resolution round before its timeout, so that the number of oracle
		// timestamps it draws (and every timestamp printed after it) is
		// deterministic.
		o.LockWaitMin, o.LockWaitMax = time.Hour, time.Hour
		o.DisableOnePhase = true // the faults are two-phase steps
		o.Faults = func(step CommitStep, startTs uint64) error {
			for name, tx := range s.txns {
				if tx.startTs == startTs && s.crashAt(name) == step {
					return fmt.Errorf("crash at %s", step)
				}
			}
			return nil
		}
	})
	s.dbs[id] = db
	return db
}

func (s *scenario) crashAt(txn string) CommitStep { return s.crashes[txn] }

func parseKey(k string) (protocol.Key, error) {
	parts := strings.SplitN(k, "/", 3)
	if len(parts) != 3 {
		return protocol.Key{}, fmt.Errorf("bad key %q: want table/row/family:qualifier", k)
	}
	fam, qual, ok := strings.Cut(parts[2], ":")
	if !ok {
		return protocol.Key{}, fmt.Errorf("bad column in %q", k)
	}
	return protocol.Key{Table: parts[0], Row: []byte(parts[1]), Column: Column{Family: fam, Qualifier: qual}}, nil
}

func arg(d *datadriven.TestData, name string) string {
	a, ok := d.Arg(name)
	if !ok || len(a.Vals) == 0 {
		return ""
	}
	return strings.Join(a.Vals, ",")
}

func (s *scenario) txn(d *datadriven.TestData) (*Txn, error) {
	name := arg(d, "txn")
	tx, ok := s.txns[name]
	if !ok {
		return nil, fmt.Errorf("no transaction %q", name)
	}
	return tx, nil
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) (string, error) {
	ctx := context.Background()
	var key protocol.Key
	if k := arg(d, "key"); k != "" {
		var err error
		if key, err = parseKey(k); err != nil {
			return "", err
		}
	}
	switch d.Cmd {
	case "begin":
		db := s.worker(t, arg(d, "worker"))
		var tx *Txn
		var err error
		if at := arg(d, "at"); at != "" {
			other, ok := s.txns[strings.TrimPrefix(at, "txn:")]
			if !ok {
				return "", fmt.Errorf("no transaction %q", at)
			}
			tx, err = db.BeginAt(other.startTs)
		} else {
			tx, err = db.Begin(ctx)
		}
		if err != nil {
			return "", err
		}
		name := arg(d, "txn")
		s.txns[name] = tx
		delete(s.crashes, name)
		return fmt.Sprintf("%s start=%s\n", name, enginetest.FormatTs(tx.startTs)), nil
	case "set", "delete":
		tx, err := s.txn(d)
		if err != nil {
			return "", err
		}
		if d.Cmd == "set" {
			err = tx.Set(key.Table, key.Row, key.Column, []byte(arg(d, "value")))
		} else {
			err = tx.Delete(key.Table, key.Row, key.Column)
		}
		if err != nil {
			return "", err
		}
		return "ok\n", nil
	case "get":
		tx, err := s.txn(d)
		if err != nil {
			return "", err
		}
		if to := arg(d, "timeout"); to != "" {
			dur, err := time.ParseDuration(to)
			if err != nil {
				return "", err
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, dur)
			defer cancel()
		}
		v, err := tx.Get(ctx, key.Table, key.Row, key.Column)
		if errors.Is(err, ErrNotFound) {
			return "not found\n", nil
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("timed out waiting for a lock")
		}
		if err != nil {
			return "", err
		}
		return string(v) + "\n", nil
	case "scan":
		return s.scan(ctx, d)
	case "commit":
		tx, err := s.txn(d)
		if err != nil {
			return "", err
		}
		s.writes[arg(d, "txn")] = tx.sortedWrites()
		if c := arg(d, "crash"); c != "" {
			s.crashes[arg(d, "txn")] = parseStep(c)
		}
		err = tx.Commit(ctx)
		var crash *CrashError
		if errors.As(err, &crash) {
			return fmt.Sprintf("crashed at %s\n", crash.Step), nil
		}
		if err != nil {
			return "", err
		}
		return "committed\n", nil
	case "rollback":
		tx, err := s.txn(d)
		if err != nil {
			return "", err
		}
		return "ok\n", tx.Rollback()
	case "late-rollback":
		tx, err := s.txn(d)
		if err != nil {
			return "", err
		}
		res, err := tx.db.st.Apply(ctx, protocol.Rollback(key, tx.startTs, true))
		if err != nil {
			return "", err
		}
		if !res.Applied {
			return "refused: the transaction committed this cell\n", nil
		}
		return "rolled back\n", nil
	case "late-prewrite", "late-commit":
		return s.late(ctx, d, key)
	case "kill":
		s.e.live.Kill(arg(d, "worker"))
		return "ok\n", nil
	case "advance-clock":
		dur, err := time.ParseDuration(arg(d, "dur"))
		if err != nil {
			return "", err
		}
		s.e.clock.Advance(dur)
		return "ok\n", nil
	case "dump":
		return dump(ctx, s.e.st, arg(d, "table"))
	case "gc":
		return s.gc(ctx, t, d)
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

func parseStep(s string) CommitStep {
	for st := StepPrimaryPrewritten; st <= StepSecondaryCommitted; st++ {
		if st.String() == s {
			return st
		}
	}
	return 0
}

func (s *scenario) scan(ctx context.Context, d *datadriven.TestData) (string, error) {
	tx, err := s.txn(d)
	if err != nil {
		return "", err
	}
	o := ScanOptions{Table: arg(d, "table")}
	if p := arg(d, "prefix"); p != "" {
		o.Prefix = []byte(p)
	}
	if v := arg(d, "start"); v != "" {
		o.Start = []byte(v)
	}
	if v := arg(d, "end"); v != "" {
		o.End = []byte(v)
	}
	if f := arg(d, "families"); f != "" {
		o.Families = strings.Split(f, ",")
	}
	var b strings.Builder
	for e, err := range tx.Scan(ctx, o) {
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s %s = %s\n", e.Row, e.Column, e.Value)
	}
	if b.Len() == 0 {
		return "(empty)\n", nil
	}
	return b.String(), nil
}

// late replays one protocol step of a transaction that is presumed gone, as
// a slow or partitioned committer would.
func (s *scenario) late(ctx context.Context, d *datadriven.TestData, key protocol.Key) (string, error) {
	tx, err := s.txn(d)
	if err != nil {
		return "", err
	}
	ms, ok := s.writes[arg(d, "txn")]
	if !ok {
		ms = tx.sortedWrites()
	}
	if len(ms) == 0 {
		return "", fmt.Errorf("transaction has no writes")
	}
	var m *mutation
	for _, w := range ms {
		if isSameKey(w.key, key) {
			m = w
		}
	}
	if m == nil {
		return "", fmt.Errorf("transaction did not write %s", key)
	}
	primary := ms[0].key
	rec := tx.lockFor(m, primary, tx.ttlMs())
	lock := &rec
	if d.Cmd == "late-prewrite" {
		if err := tx.prewrite(ctx, tx.prewriteTxn([]*mutation{m}, []*protocol.Lock{lock}, []int{0}, nil)); err != nil {
			return "", err
		}
		return "prewritten\n", nil
	}
	commitTs, err := tx.db.or.Timestamp(ctx)
	if err != nil {
		return "", err
	}
	res, err := tx.db.st.Apply(ctx, protocol.CommitPrimary(key, tx.startTs, commitTs, writeFromLock(tx.startTs, lock)))
	if err != nil {
		return "", err
	}
	if !res.Applied {
		return "commit point refused: lock is gone\n", nil
	}
	return fmt.Sprintf("committed at %s\n", enginetest.FormatTs(commitTs)), nil
}

func (s *scenario) gc(ctx context.Context, t *testing.T, d *datadriven.TestData) (string, error) {
	var upTo uint64
	if u := arg(d, "upto"); strings.HasPrefix(u, "txn:") {
		tx, ok := s.txns[strings.TrimPrefix(u, "txn:")]
		if !ok {
			return "", fmt.Errorf("no transaction %q", u)
		}
		upTo = tx.startTs
	}
	st, err := s.worker(t, "w1").GC(ctx, upTo)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("safe point %s: %d columns, %d versions deleted, %d locks resolved\n",
		enginetest.FormatTs(st.SafePoint), st.Columns, st.Deleted, st.LocksResolved), nil
}

// dump prints every raw cell of a table with its protocol kind decoded.
func dump(ctx context.Context, st store.Store, table string) (string, error) {
	var b strings.Builder
	for _, group := range []string{store.DefaultGroup, protocol.NotifyGroup} {
		for c, err := range st.Scan(ctx, store.ScanRequest{Table: table, Group: group}) {
			if err != nil {
				return "", err
			}
			line, err := protocol.Describe(c, enginetest.FormatTs)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%q %s\n", c.Row, line)
		}
	}
	if b.Len() == 0 {
		return "(empty)\n", nil
	}
	return b.String(), nil
}
