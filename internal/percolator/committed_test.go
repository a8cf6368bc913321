package percolator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/internal/protocol"
)

// Rule: that a transaction committed, and at what timestamp, never
// changes, so a DB reads it from the store at most once, and not at all
// for its own commits; every other status (locked, rolled back, missing)
// can still change and is read each time it is asked.
func TestCommittedStatusIsReadOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	counter := &readCounter{Store: e.st}
	asker, err := New(counter, e.or, &Options{WorkerID: "asker", Liveness: e.live, LockTTL: time.Hour, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	primary := protocol.Key{Table: "t", Row: []byte("a"), Column: balance}
	status := func(startTs uint64) protocol.Status {
		t.Helper()
		st, err := asker.txnStatus(ctx, primary, startTs)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	write := func(db *DB) *Txn {
		t.Helper()
		tx := writeAB(t, db)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return tx
	}

	// Committed by another worker: read once.
	other := write(e.db(t, "other", nil))
	counter.readRow.Store(0)
	for range 3 {
		if st := status(other.startTs); st.State != protocol.StateCommitted || st.CommitTs != other.commitTs {
			t.Fatalf("status of another worker's commit: %+v, want committed at %d", st, other.commitTs)
		}
	}
	if n := counter.readRow.Load(); n != 1 {
		t.Fatalf("%d status reads for three questions about one commit, want 1", n)
	}

	// Committed by the asker itself: never read.
	own := write(asker)
	counter.readRow.Store(0)
	if st := status(own.startTs); st.State != protocol.StateCommitted || st.CommitTs != own.commitTs {
		t.Fatalf("status of the asker's own commit: %+v, want committed at %d", st, own.commitTs)
	}
	if n := counter.readRow.Load(); n != 0 {
		t.Fatalf("%d status reads for the asker's own commit, want 0", n)
	}

	// Locked: read every time, and the commit is seen once it happens.
	var locked []protocol.Status
	pausing := e.db(t, "pausing", func(o *Options) {
		o.DisableOnePhase = true // the faults are two-phase steps
		o.Faults = func(step CommitStep, startTs uint64) error {
			if step == StepPrewritten {
				locked = append(locked, status(startTs), status(startTs))
			}
			return nil
		}
	})
	counter.readRow.Store(0)
	late := write(pausing)
	for i, st := range locked {
		if st.State != protocol.StateLocked {
			t.Fatalf("status %d while prewritten: %+v, want locked", i, st)
		}
	}
	if n := counter.readRow.Load(); n != 2 {
		t.Fatalf("%d status reads for two questions about a locked transaction, want 2", n)
	}
	if st := status(late.startTs); st.State != protocol.StateCommitted || st.CommitTs != late.commitTs {
		t.Fatalf("status after the commit: %+v, want committed at %d", st, late.commitTs)
	}
}

// The cache of commits is bounded: past its size the oldest are forgotten
// (and read again when asked), the newest kept.
func TestCommittedCacheForgetsTheOldest(t *testing.T) {
	var c committedCache
	for ts := uint64(1); ts <= committedCacheSize+1; ts++ {
		c.add(ts, ts+1000)
	}
	if _, ok := c.get(1); ok {
		t.Error("the first commit is still remembered after the cache filled")
	}
	for _, ts := range []uint64{committedCacheSize/2 + 2, committedCacheSize, committedCacheSize + 1} {
		if got, ok := c.get(ts); !ok || got != ts+1000 {
			t.Errorf("get(%d) = %d, %v; want %d, true", ts, got, ok, ts+1000)
		}
	}
	if n := len(c.cur) + len(c.old); n > committedCacheSize {
		t.Errorf("%d commits remembered, bound %d", n, committedCacheSize)
	}
}

// Rule: a reader that meets a secondary lock of a transaction its own DB
// committed (the committer stopped after the commit point, before its
// secondaries) rolls it forward on the remembered commit, without reading
// the primary.
func TestRememberedCommitRollsSecondariesForward(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	counter := &readCounter{Store: e.st}
	db, err := New(counter, e.or, &Options{WorkerID: "w", Liveness: e.live, LockTTL: time.Hour, Logger: quietLogger(),
		DisableOnePhase: true, // the faults are two-phase steps
		Faults: func(step CommitStep, _ uint64) error {
			if step == StepCommitted {
				return errors.New("stop before the secondaries")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAB(t, db).Commit(ctx); !errors.Is(err, ErrCrashed) {
		t.Fatalf("commit: %v, want the injected stop", err)
	}
	counter.readRow.Store(0)
	var v []byte
	if err := db.View(ctx, func(ctx context.Context, r *Txn) error {
		var err error
		v, err = r.Get(ctx, "t", []byte("b"), balance)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if string(v) != "b" {
		t.Fatalf("read %q behind the left-over lock, want %q", v, "b")
	}
	// The read of b before and after rolling it forward; no read of a.
	if n := counter.readRow.Load(); n != 2 {
		t.Fatalf("%d row reads, want 2 (b's lock, then its write): the primary was read", n)
	}
	if got := db.Stats().RolledForward.Load(); got != 1 {
		t.Fatalf("rolled forward %d cells, want 1", got)
	}
}

// writeAB begins a transaction on db that writes rows a and b (a is the
// primary), for the caller to commit.
func writeAB(t *testing.T, db *DB) *Txn {
	t.Helper()
	tx, err := db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"a", "b"} {
		if err := tx.Set("t", []byte(r), balance, []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	return tx
}
