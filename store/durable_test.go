package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// openStalled opens a synced store on a crashable in-memory filesystem
// whose log syncs the returned fault can stall.
func openStalled(t *testing.T) (*store.DB, *vfs.MemFS, *storetest.LogStall) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	stall := storetest.NewLogStall()
	opts := memOptions(stall.Wrap(mem))
	opts.Durability = store.DurabilitySynced
	db, err := store.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stall.Release() // a failed test may leave a write stalled
		db.Close()
	})
	return db, mem, stall
}

// reopenCrashed opens what a crash at this moment leaves of mem: only what
// was synced.
func reopenCrashed(t *testing.T, mem *vfs.MemFS) *store.DB {
	t.Helper()
	db, err := store.Open("db", memOptions(mem.CrashClone(vfs.CrashCloneCfg{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestReadsNeverSeeWritesACrashCanTakeBack: a synced write is readable in
// pebble before its log sync ends; a read of its row must not answer with
// it until it is durable, or a reader could act on a commit point (or a
// rollback record) that a crash of the store then erases. Each way of
// reading (ReadRow's Get and iterator paths, ReadRows, Scan) meets a
// commit whose sync is stalled: it must wait, and after a crash taken
// while it waits, the write is indeed gone.
func TestReadsNeverSeeWritesACrashCanTakeBack(t *testing.T) {
	c := col("f", "q")
	reads := map[string]func(ctx context.Context, db *store.DB) ([]store.Cell, error){
		"ReadRow exact version": func(ctx context.Context, db *store.DB) ([]store.Cell, error) {
			return db.ReadRow(ctx, "t", []byte("r"), []store.Column{c}, []store.Span{{MaxTs: 7, MinTs: 7}})
		},
		"ReadRow span": func(ctx context.Context, db *store.DB) ([]store.Cell, error) {
			return db.ReadRow(ctx, "t", []byte("r"), []store.Column{c}, nil)
		},
		"ReadRows": func(ctx context.Context, db *store.DB) ([]store.Cell, error) {
			res, err := db.ReadRows(ctx, []store.RowRead{{Table: "t", Row: []byte("a"), Columns: []store.Column{c}}, {Table: "t", Row: []byte("r"), Columns: []store.Column{c}}})
			if err != nil {
				return nil, err
			}
			return append(res[0], res[1]...), nil
		},
		"Scan": func(ctx context.Context, db *store.DB) ([]store.Cell, error) {
			var out []store.Cell
			for cell, err := range db.Scan(ctx, store.ScanRequest{Table: "t"}) {
				if err != nil {
					return out, err
				}
				out = append(out, cell)
			}
			return out, nil
		},
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			db, mem, stall := openStalled(t)
			put(t, db, "t", []byte("a"), c, 1, "before") // synced: survives any crash
			waiting := make(chan struct{}, 1)
			store.SetDurableWaitHook(db, func(int) { waiting <- struct{}{} })

			stall.Arm()
			committed := make(chan error, 1)
			go func() {
				_, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("r"),
					Mutations: []store.Mutation{{Column: c, Ts: 7, Value: []byte("commit point")}}})
				committed <- err
			}()
			<-stall.Stalled() // the write is readable, its sync blocked

			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			type answer struct {
				cells []store.Cell
				err   error
			}
			answered := make(chan answer, 1)
			go func() {
				cells, err := read(rctx, db)
				answered <- answer{cells, err}
			}()
			select {
			case a := <-answered:
				for _, cell := range a.cells {
					if string(cell.Value) == "commit point" {
						t.Fatalf("the read answered %q while its sync was stalled", cell.Value)
					}
				}
				t.Fatalf("the read answered without waiting for the stalled write: %v %v", a.cells, a.err)
			case <-waiting:
			}
			// A crash now: the write was never durable, so it is gone.
			crashed := reopenCrashed(t, mem)
			if cells, err := crashed.ReadRow(ctx, "t", []byte("r"), []store.Column{c}, nil); err != nil || len(cells) != 0 {
				t.Fatalf("after the crash the stalled write reads %v %v; want nothing (the test's crash is not one)", cells, err)
			}
			if cells, err := crashed.ReadRow(ctx, "t", []byte("a"), []store.Column{c}, nil); err != nil || len(cells) != 1 {
				t.Fatalf("after the crash the synced write reads %v %v", cells, err)
			}
			// The waiting reader gives up with its context, saying why.
			cancel()
			a := <-answered
			if !errors.Is(a.err, context.Canceled) || !strings.Contains(a.err.Error(), "stable storage") {
				t.Fatalf("the canceled read answered %v %v", a.cells, a.err)
			}

			// Once the sync completes, the write reads.
			stall.Release()
			if err := <-committed; err != nil {
				t.Fatal(err)
			}
			cells, err := read(ctx, db)
			found := false
			for _, cell := range cells {
				found = found || string(cell.Value) == "commit point"
			}
			if err != nil || !found {
				t.Fatalf("after the sync the read answers %v %v", cells, err)
			}
		})
	}
}

// TestReadsDoNotWaitForNoSyncWrites: a NoSync write (a prewrite's lock) is
// read at once; only synced writes, the ones readers act on, make reads
// wait.
func TestReadsDoNotWaitForNoSyncWrites(t *testing.T) {
	db, _, _ := openStalled(t)
	c := col("f", "q")
	store.SetDurableWaitHook(db, func(int) { t.Error("a read waited for a NoSync write") })
	res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("r"), NoSync: true,
		Mutations: []store.Mutation{{Column: c, Ts: 7, Value: []byte("lock")}}})
	if err != nil || !res.Applied {
		t.Fatal(res, err)
	}
	cells, err := db.ReadRow(ctx, "t", []byte("r"), []store.Column{c}, nil)
	if err != nil || len(cells) != 1 {
		t.Fatal(cells, err)
	}
}
