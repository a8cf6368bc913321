package admin_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/frameworktest"
)

var (
	in  = framework.Column{Family: "c", Qualifier: "in"}
	out = framework.Column{Family: "c", Qualifier: "out"}
)

// An operator sees what is pending and what keeps failing, and why.
func TestPendingAndFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := startPicky(t, ctx, "picky", "bad", "cannot handle bad")
	write(t, ctx, env, "good", "bad")
	if err := env.WaitForObservers(ctx); !errors.Is(err, frameworktest.ErrObserverFailing) {
		t.Fatalf("wait: %v", err)
	}
	if n, err := admin.Pending(ctx, env.Store(), nil); err != nil || n != 1 {
		t.Fatalf("pending = %d, %v; want the failing one", n, err)
	}
	tables, err := admin.ObservedTables(ctx, env.Store())
	if err != nil || len(tables) != 1 || tables[0] != "t" {
		t.Fatalf("observed tables %v, %v", tables, err)
	}
	fs, err := admin.Failures(ctx, env.Store())
	if err != nil || len(fs) != 1 {
		t.Fatalf("failures %v, %v", fs, err)
	}
	f := fs[0]
	if f.Table != "t" || string(f.Row) != "bad" || f.Column != in || f.Observer != "picky" || f.Attempts < 3 || !strings.Contains(f.LastError, "cannot handle bad") {
		t.Fatalf("failure record %+v", f)
	}
	if frameworktest.OnTiKV() {
		return // Dump shows the cells of the engine over a store
	}
	var dump bytes.Buffer
	if err := admin.Dump(ctx, env.Store(), "t", &dump, admin.DumpOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"good" c:out write@`, `"bad" c:in notify@`, "__ack"} {
		if !strings.Contains(dump.String(), want) {
			t.Errorf("dump lacks %q:\n%s", want, dump.String())
		}
	}
}

// Collection moves the safe point; snapshots below it are refused.
func TestGC(t *testing.T) {
	ctx := context.Background()
	env, err := frameworktest.Start(ctx, framework.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	db := env.DB()
	for _, v := range []string{"1", "2", "3"} {
		if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("t", []byte("r"), in, []byte(v))
		}); err != nil {
			t.Fatal(err)
		}
	}
	before := admin.SafePoint(db)
	st, err := admin.GC(ctx, db, 0)
	if err != nil {
		t.Fatal(err)
	}
	// TiKV's collection does not report what it removed.
	if st.SafePoint <= before || admin.SafePoint(db) != st.SafePoint || (st.Deleted == 0 && !frameworktest.OnTiKV()) {
		t.Fatalf("gc %+v, safe point %d -> %d", st, before, admin.SafePoint(db))
	}
	if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		v, err := tx.Get(ctx, "t", []byte("r"), in)
		if string(v) != "3" {
			t.Errorf("after gc: %q", v)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// AwaitNoPending returns once the observers dealt with every write, and
// says how many notifications were left when its context ends first.
func TestAwaitNoPending(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := startPicky(t, ctx, "copy", "stuck", "stuck for good")
	write(t, ctx, env, "a")
	if err := admin.AwaitNoPending(ctx, env.Store(), nil, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := env.DB().View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		v, err := tx.Get(ctx, "t", []byte("a"), out)
		if err == nil && string(v) != "done" {
			err = errors.New("a's out is " + string(v))
		}
		return err
	}); err != nil {
		t.Fatalf("after AwaitNoPending returned: %v, want a's observer run", err)
	}
	write(t, ctx, env, "stuck")
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	err := admin.AwaitNoPending(short, env.Store(), []string{"t"}, 5*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 notifications still pending") {
		t.Fatalf("AwaitNoPending with a notification stuck: %v, want the deadline and the count left", err)
	}
}

// startPicky starts a deployment whose observer name copies t's column in
// to out, except in row bad, where it fails with msg.
func startPicky(t *testing.T, ctx context.Context, name, bad, msg string) *frameworktest.Env {
	t.Helper()
	reg := framework.NewRegistry()
	err := reg.Register(framework.Observer{Name: name, Table: "t", Columns: []framework.Column{in}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, col framework.Column) error {
			if string(row) == bad {
				return errors.New(msg)
			}
			return tx.Set("t", row, out, []byte("done"))
		}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := frameworktest.Start(ctx, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

// write sets column in of each of rows of t.
func write(t *testing.T, ctx context.Context, env *frameworktest.Env, rows ...string) {
	t.Helper()
	for _, row := range rows {
		if err := env.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("t", []byte(row), in, []byte("x"))
		}); err != nil {
			t.Fatal(err)
		}
	}
}
