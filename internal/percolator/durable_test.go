package percolator

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// ownerView is a client's view of a store owned by another process: calls
// go to the store the owner serves now, and a call whose owner died while
// it was under way fails with store.ErrUnavailable, as an answer that
// never came back would: whatever the dead owner's store said is lost
// with it.
type ownerView struct {
	mu  sync.Mutex
	cur store.Store
	gen int
	// onRead, if set, is called with the row of every ReadRow before it
	// goes to the store.
	onRead func(row []byte)
}

func (v *ownerView) serve(st store.Store) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cur, v.gen = st, v.gen+1
}

func (v *ownerView) get() (store.Store, int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cur, v.gen
}

// lost reports a call that began on generation gen and outlived its owner.
func (v *ownerView) lost(gen int) error {
	if _, now := v.get(); now != gen {
		return errors.Join(store.ErrUnavailable, errors.New("the owner died before answering"))
	}
	return nil
}

func (v *ownerView) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	if v.onRead != nil {
		v.onRead(row)
	}
	st, gen := v.get()
	cells, err := st.ReadRow(ctx, table, row, cols, spans)
	if lost := v.lost(gen); lost != nil {
		return nil, lost
	}
	return cells, err
}

func (v *ownerView) ReadRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	st, gen := v.get()
	res, err := st.ReadRows(ctx, reads)
	if lost := v.lost(gen); lost != nil {
		return nil, lost
	}
	return res, err
}

func (v *ownerView) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	st, _ := v.get()
	return st.Scan(ctx, req)
}

func (v *ownerView) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	st, gen := v.get()
	res, err := st.Apply(ctx, txn)
	if lost := v.lost(gen); lost != nil {
		return store.RowResult{FailedCheck: -1}, lost
	}
	return res, err
}

func (v *ownerView) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	st, gen := v.get()
	res, err := st.ApplyAll(ctx, txns)
	if lost := v.lost(gen); lost != nil {
		return nil, lost
	}
	return res, err
}

func (v *ownerView) Tables(ctx context.Context, group string) ([]string, error) {
	st, _ := v.get()
	return st.Tables(ctx, group)
}

func (v *ownerView) Close() error { return nil }

// TestACrashCannotSplitATransactionARollForwardSaw reproduces how an owner
// crash split a transaction: a client read the primary's commit record
// while the commit point's log sync was still under way, remembered the
// transaction as committed, and after the owner's crash erased the commit
// point rolled a secondary forward from that memory, while another client
// found the primary locked by a dead owner and rolled it back. The store
// must not answer a read with a write a crash can take back (see
// store.DB.ReadRow): the client's read of the primary waits for the
// commit point's sync, the crash ends the wait without an answer, and the
// transaction ends rolled back on both cells.
func TestACrashCannotSplitATransactionARollForwardSaw(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	stall := storetest.NewLogStall()
	t.Cleanup(stall.Release)
	open := func(fs vfs.FS) store.Store {
		st, err := store.Open("", protocol.StoreOptions(&store.Options{FS: fs, Logger: quietLogger()}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	owner := open(stall.Wrap(mem))
	e := newEnvOn(t, owner)
	primary := protocol.Key{Table: "t", Row: []byte("p"), Column: colA}
	secondary := protocol.Key{Table: "t", Row: []byte("s"), Column: colA}

	// The owner's own transaction: its prewrites reach stable storage
	// (another synced write follows them), then its commit point's sync
	// stalls.
	committer := e.db(t, "owner", func(o *Options) {
		o.DisableOnePhase = true
		o.Faults = func(step CommitStep, _ uint64) error {
			if step == StepPrewritten {
				if _, err := owner.Apply(ctx, &store.RowTxn{Table: "other", Row: []byte("x"),
					Mutations: []store.Mutation{{Column: colA, Value: []byte("sync")}}}); err != nil {
					return err
				}
				stall.Arm()
			}
			return nil
		}
	})
	go func() {
		_ = committer.Update(ctx, func(ctx context.Context, tx *Txn) error {
			if err := tx.Set("t", primary.Row, colA, []byte("v")); err != nil {
				return err
			}
			return tx.Set("t", secondary.Row, colA, []byte("v"))
		})
	}()
	<-stall.Stalled()

	// A client reads the secondary, finds its lock and asks the primary.
	view := &ownerView{}
	view.serve(owner)
	asked := make(chan struct{})
	var once sync.Once
	view.onRead = func(row []byte) {
		if string(row) == "p" {
			once.Do(func() { close(asked) })
		}
	}
	client := e.dbWith(t, view, &Options{WorkerID: "client", Liveness: e.live, LockTTL: 10 * time.Second, Logger: quietLogger()})
	var firstErr error
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		firstErr = client.View(ctx, func(ctx context.Context, tx *Txn) error {
			_, err := tx.Get(ctx, "t", secondary.Row, colA)
			return err
		})
	}()
	<-asked

	// The owner dies now: its unsynced commit point is gone. Another
	// process takes over what the disk kept.
	view.serve(open(mem.CrashClone(vfs.CrashCloneCfg{})))
	e.live.Kill("owner")
	stall.Release()
	<-firstDone

	// Another client finds the primary locked by a dead owner and rolls
	// the transaction back there; then the first client reads again.
	other := e.dbWith(t, view, &Options{WorkerID: "other", Liveness: e.live, LockTTL: 10 * time.Second, Logger: quietLogger()})
	read := func(db *DB, k protocol.Key) error {
		return db.View(ctx, func(ctx context.Context, tx *Txn) error {
			_, err := tx.Get(ctx, k.Table, k.Row, k.Column)
			return err
		})
	}
	if err := read(other, primary); !errors.Is(err, ErrNotFound) {
		t.Fatalf("reading the primary after the crash: %v, want ErrNotFound (rolled back)", err)
	}
	if err := read(client, secondary); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the first client reads the secondary as %v after the primary was rolled back (its first read ended with %v): the transaction is split", err, firstErr)
	}
	taken, _ := view.get()
	for _, k := range []protocol.Key{primary, secondary} {
		cells, err := taken.ReadRow(ctx, k.Table, k.Row, []Column{k.Column}, protocol.StatusSpans(1))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells {
			if kind, _ := protocol.Untag(c.Ts); kind == protocol.KindWrite {
				t.Errorf("%s has a write record after the transaction was rolled back at its primary", k)
			}
		}
	}
}
