package export_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/internal/pgtest"
)

var pgQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// shared is one PostgreSQL server for the package's tests, each test on
// tables of its own; started by the first test that needs it, stopped by
// TestMain.
var shared struct {
	once sync.Once
	s    *pgtest.Server
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.s != nil {
		shared.s.Close()
	}
	os.Exit(code)
}

// sharedServer returns the shared server, skipping t without one.
func sharedServer(t testing.TB) *pgtest.Server {
	t.Helper()
	shared.once.Do(func() { shared.s, shared.err = pgtest.New() })
	if errors.Is(shared.err, pgtest.ErrNoServer) {
		t.Skip(shared.err.Error())
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.s
}

// newPostgresSink returns a sink on dsn into table, closed when t ends.
func newPostgresSink(t testing.TB, dsn string, opts export.PostgresOptions) *export.PostgresSink {
	t.Helper()
	opts.Logger = pgQuiet
	s, err := export.NewPostgresSink(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// row is a row of a sink's table.
type row struct {
	value   string
	seq     int64
	deleted bool
}

// rows reads a sink's table (and, with DeleteRows, its tombstones as
// deleted rows without their value).
func rows(t testing.TB, dsn, table string, deleteRows bool) map[string]row {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	out := map[string]row{}
	q := "SELECT key, value, seq, deleted FROM " + table
	if deleteRows {
		q += " UNION ALL SELECT key, NULL, seq, true FROM " + table + "_deleted"
	}
	rs, _ := c.Query(ctx, q)
	var k string
	var v []byte
	var r row
	if _, err := pgx.ForEachRow(rs, []any{&k, &v, &r.seq, &r.deleted}, func() error {
		r.value = string(v)
		if _, ok := out[k]; ok && !r.deleted {
			t.Errorf("key %s has a row and a tombstone", k)
		}
		if !r.deleted || out[k].seq < r.seq {
			out[k] = r
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// exec runs sql on dsn.
func exec(t testing.TB, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

// live is the table's live rows as the query in docs/export.md reads them.
func live(t testing.TB, dsn, table string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, r := range rows(t, dsn, table, false) {
		if !r.deleted {
			out[k] = r.value
		}
	}
	return out
}

func entry(k string, seq uint64, v string) export.Entry {
	return export.Entry{Key: []byte(k), Seq: seq, Value: []byte(v)}
}

func tombstone(k string, seq uint64) export.Entry {
	return export.Entry{Key: []byte(k), Seq: seq, Delete: true}
}

// bothModes runs f on a table that marks tombstones and on one that
// deletes rows.
func bothModes(t *testing.T, f func(t *testing.T, opts export.PostgresOptions)) {
	for _, deleteRows := range []bool{false, true} {
		t.Run(fmt.Sprintf("DeleteRows=%v", deleteRows), func(t *testing.T) {
			name := strings.ToLower(strings.TrimPrefix(t.Name(), "TestPostgres"))
			table := fmt.Sprintf("%.30s_%v", strings.NewReplacer("/", "_", "=", "_").Replace(name), deleteRows)
			f(t, export.PostgresOptions{Table: table, DeleteRows: deleteRows})
		})
	}
}

// An entry older than the row's arrives after it (K@20, then K@10): the
// row keeps 20, whether the older entry is a value or a tombstone, or
// comes in one batch with the newer one.
func TestPostgresOlderEntriesArrivingLateAreIgnored(t *testing.T) {
	dsn := sharedServer(t).DSN()
	bothModes(t, func(t *testing.T, opts export.PostgresOptions) {
		s := newPostgresSink(t, dsn, opts)
		ctx := context.Background()
		for _, b := range [][]export.Entry{
			{entry("k", 20, "twenty"), entry("d", 20, "twenty"), entry("same", 5, "a"), entry("same", 9, "b"), entry("same", 7, "c")},
			{entry("k", 10, "ten"), tombstone("d", 10), tombstone("gone", 30)},
			{entry("gone", 29, "late")},
		} {
			if err := s.Export(ctx, "q", b); err != nil {
				t.Fatal(err)
			}
		}
		got := rows(t, dsn, opts.Table, opts.DeleteRows)
		want := map[string]row{"k": {"twenty", 20, false}, "d": {"twenty", 20, false}, "same": {"b", 9, false}, "gone": {"", 30, true}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
		tab := export.NewTable()
		if err := s.Rows(ctx, func(e export.Entry) error { tab.Apply(e); return nil }); err != nil {
			t.Fatal(err)
		}
		equalTo(t, tab, map[string]string{"k": "twenty", "d": "twenty", "same": "b"})
	})
}

// A batch exported again (its drain's commit conflicted, or the process
// died before it) changes nothing, not even a row's updated_at.
func TestPostgresRedeliveryIsIdempotent(t *testing.T) {
	dsn := sharedServer(t).DSN()
	bothModes(t, func(t *testing.T, opts export.PostgresOptions) {
		s := newPostgresSink(t, dsn, opts)
		ctx := context.Background()
		batch := []export.Entry{entry("a", 3, "x"), tombstone("b", 4), entry("c", 5, ""), entry("d", 6, "y")}
		if err := s.Export(ctx, "q", batch); err != nil {
			t.Fatal(err)
		}
		stamp := func() string {
			var out string
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if err := conn.QueryRow(ctx, "SELECT string_agg(key || '=' || updated_at::text, ',' ORDER BY key) FROM "+opts.Table).Scan(&out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		first, before := rows(t, dsn, opts.Table, opts.DeleteRows), stamp()
		for range 2 {
			if err := s.Export(ctx, "q", batch); err != nil {
				t.Fatal(err)
			}
		}
		if again := rows(t, dsn, opts.Table, opts.DeleteRows); fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("after redelivery %v, before %v", again, first)
		}
		if after := stamp(); after != before {
			t.Fatalf("redelivery touched rows: updated_at %s, before %s", after, before)
		}
		if r := first["c"]; r.deleted || r.value != "" || r.seq != 5 {
			t.Fatalf("an empty value stored as %+v, want a live row with an empty value", r)
		}
	})
}

// A key deleted, then added again with a higher sequence number, is live
// again with the new value; an older value delivered late stays out.
func TestPostgresDeletedKeyComesBack(t *testing.T) {
	dsn := sharedServer(t).DSN()
	bothModes(t, func(t *testing.T, opts export.PostgresOptions) {
		s := newPostgresSink(t, dsn, opts)
		ctx := context.Background()
		for _, b := range [][]export.Entry{{entry("k", 1, "one")}, {tombstone("k", 2)}, {entry("k", 1, "one")}} {
			if err := s.Export(ctx, "q", b); err != nil {
				t.Fatal(err)
			}
		}
		if got := live(t, dsn, opts.Table); len(got) != 0 {
			t.Fatalf("after the delete and a late older value: %v, want no live row", got)
		}
		if err := s.Export(ctx, "q", []export.Entry{entry("k", 3, "three")}); err != nil {
			t.Fatal(err)
		}
		if got := rows(t, dsn, opts.Table, opts.DeleteRows); fmt.Sprint(got) != fmt.Sprint(map[string]row{"k": {"three", 3, false}}) {
			t.Fatalf("re-added: %v, want k=three@3 live", got)
		}
	})
}

// A value far larger than a page (stored out of line, TOASTed) comes back
// whole, in bytea and in jsonb.
func TestPostgresLargeValues(t *testing.T) {
	dsn := sharedServer(t).DSN()
	ctx := context.Background()
	blob := make([]byte, 256<<10)
	rand.Read(blob) // incompressible: stored out of line, not compressed inline
	doc := fmt.Sprintf(`{"text": "%x"}`, blob)
	for _, tc := range []struct {
		values export.ValueType
		value  []byte
	}{{export.Bytea, blob}, {export.JSONB, []byte(doc)}} {
		table := "large_" + string(tc.values)
		s := newPostgresSink(t, dsn, export.PostgresOptions{Table: table, Values: tc.values})
		if err := s.Export(ctx, "q", []export.Entry{{Key: []byte("big"), Seq: 1, Value: tc.value}, entry("small", 1, `"s"`)}); err != nil {
			t.Fatal(err)
		}
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		var toasted int64
		if tc.values == export.Bytea {
			err = c.QueryRow(ctx, "SELECT value FROM "+table+" WHERE key = 'big'").Scan(&got)
		} else {
			var v string
			err = c.QueryRow(ctx, "SELECT value->>'text' FROM "+table+" WHERE key = 'big'").Scan(&v)
			got = fmt.Appendf(nil, `{"text": %q}`, v)
		}
		if err == nil {
			err = c.QueryRow(ctx, "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE oid = $1::regclass", table).Scan(&toasted)
		}
		c.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(tc.value) {
			t.Errorf("%s: a value of %d bytes came back as %d bytes", tc.values, len(tc.value), len(got))
		}
		if toasted == 0 {
			t.Errorf("%s: nothing in the TOAST table: the value was not stored out of line", tc.values)
		}
	}
}

// startQueue runs a queue named q of buckets draining to sink.
func startQueue(t *testing.T, buckets, batch int, sink export.Sink) (*export.Queue, *frameworktest.Env) {
	t.Helper()
	return start(t, export.Options{Buckets: buckets, BatchSize: batch, Logger: pgQuiet}, sink, nil)
}

// drained waits until q is empty and its observer no longer failing (the
// failures of a sink that was down count against WaitForObservers), then
// for the observers to be idle.
func drained(t *testing.T, env *frameworktest.Env, q *export.Queue) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		fs, err := admin.Failures(ctx, env.Store())
		if err != nil {
			t.Fatal(err)
		}
		failing := 0
		for _, f := range fs {
			if f.Observer == q.Observer() {
				failing++
			}
		}
		n := queued(t, env, q)
		if n == 0 && failing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries still queued, %d notifications failing", n, failing)
		}
		time.Sleep(20 * time.Millisecond) // polling for the queue to drain
	}
	wait(t, env)
}

// waitForFailure waits until the queue's observer is listed failing with
// an error containing all of says, and returns it.
func waitForFailure(t *testing.T, env *frameworktest.Env, q *export.Queue, says ...string) string {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); ; {
		fs, err := admin.Failures(ctx, env.Store())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.Observer != q.Observer() {
				continue
			}
			missing := false
			for _, s := range says {
				missing = missing || !strings.Contains(f.LastError, s)
			}
			if !missing {
				return f.LastError
			}
			t.Logf("failure listed: %s", f.LastError)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failure of %s listed saying %q", q.Observer(), says)
		}
		time.Sleep(20 * time.Millisecond) // polling for the failure record
	}
}

// queued is how many entries wait in q.
func queued(t *testing.T, env *frameworktest.Env, q *export.Queue) int {
	t.Helper()
	s, err := q.Status(context.Background(), env.DB())
	if err != nil {
		t.Fatal(err)
	}
	return s.Entries
}

// putAll exports n keys k000… with values v000… through q.
func putAll(t *testing.T, env *frameworktest.Env, q *export.Queue, n int, value func(i int) string) map[string]string {
	t.Helper()
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("k%03d", i), value(i)
		if err := put(context.Background(), env.DB(), q, k, v); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	return want
}

// A batch the server refuses half-way (its 31st value breaks a CHECK
// constraint) applies nothing: the table stays empty, every entry stays
// queued and the failure is listed naming the table; once the constraint
// goes, the drain's retry writes them all.
func TestPostgresBatchRefusedHalfWayAppliesNothing(t *testing.T) {
	dsn := sharedServer(t).DSN()
	sink := newPostgresSink(t, dsn, export.PostgresOptions{Table: "refused", Values: export.JSONB})
	exec(t, dsn, `ALTER TABLE refused ADD CONSTRAINT no_poison CHECK (value IS NULL OR NOT value ? 'poison')`)
	q, idle := startQueue(t, 1, 100, sink)
	idle.StopObservers() // every entry queued before the first drain: it takes them at once
	want := putAll(t, idle, q, 60, func(i int) string {
		if i == 30 {
			return `{"poison": true}`
		}
		return fmt.Sprintf(`{"n": %d}`, i)
	})
	_, env := start(t, export.Options{Buckets: 1, BatchSize: 100, Logger: pgQuiet}, sink, idle)
	waitForFailure(t, env, q, "no_poison", "table refused", sharedServer(t).Host())
	if got := live(t, dsn, "refused"); len(got) != 0 {
		t.Fatalf("%d rows applied of a refused batch", len(got))
	}
	if n := queued(t, env, q); n != 60 {
		t.Fatalf("%d entries queued after the refused batch, want 60", n)
	}
	exec(t, dsn, `ALTER TABLE refused DROP CONSTRAINT no_poison`)
	drained(t, env, q)
	if got := live(t, dsn, "refused"); len(got) != len(want) {
		t.Fatalf("%d rows after the retry, want %d", len(got), len(want))
	}
	if n := queued(t, env, q); n != 0 {
		t.Fatalf("%d entries still queued", n)
	}
}

// A batch whose connection dies half-way (the server takes too long on
// its 31st row; the sink gives up after Timeout and drops the connection)
// applies nothing and is retried whole.
func TestPostgresBatchCutHalfWayAppliesNothing(t *testing.T) {
	dsn := sharedServer(t).DSN()
	sink := newPostgresSink(t, dsn, export.PostgresOptions{Table: "cut", Timeout: 300 * time.Millisecond})
	exec(t, dsn, `CREATE TABLE cut_stall (stall boolean);
INSERT INTO cut_stall VALUES (true);
CREATE FUNCTION cut_stall() RETURNS trigger AS $$
BEGIN
	IF NEW.key = 'k030' AND (SELECT stall FROM cut_stall) THEN PERFORM pg_sleep(5); END IF;
	RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER stall BEFORE INSERT ON cut FOR EACH ROW EXECUTE FUNCTION cut_stall();`)
	q, idle := startQueue(t, 1, 100, sink)
	idle.StopObservers() // every entry queued before the first drain: it takes them at once
	want := putAll(t, idle, q, 60, func(i int) string { return fmt.Sprint("v", i) })
	_, env := start(t, export.Options{Buckets: 1, BatchSize: 100, Logger: pgQuiet}, sink, idle)
	waitForFailure(t, env, q, "no answer within 300ms", "table cut")
	if got := live(t, dsn, "cut"); len(got) != 0 {
		t.Fatalf("%d rows applied of a batch cut half-way", len(got))
	}
	if n := queued(t, env, q); n == 0 {
		t.Fatal("nothing queued after a batch cut half-way")
	}
	exec(t, dsn, `UPDATE cut_stall SET stall = false`)
	drained(t, env, q)
	equalRows(t, live(t, dsn, "cut"), want)
}

// equalRows fails unless got is want.
func equalRows(t *testing.T, got, want map[string]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the table holds %d rows %.300v\nwant %d rows %.300v", len(got), got, len(want), want)
	}
}

// The server crashes (an immediate shutdown) and comes back while the
// queue drains into it: the batches that failed meanwhile are retried,
// and the table ends with every key's last entry, nothing lost.
func TestPostgresServerRestartedMidExport(t *testing.T) {
	srv := pgtest.Start(t)
	sink := newPostgresSink(t, srv.DSN(), export.PostgresOptions{Table: "restarted", Timeout: 2 * time.Second, ConnectTimeout: time.Second})
	var calls, failed atomic.Int64
	restarted := make(chan error, 1)
	wrapped := export.SinkFunc(func(ctx context.Context, queue string, entries []export.Entry) error {
		if calls.Add(1) == 4 {
			if err := srv.Crash(); err != nil {
				return err
			}
			go func() {
				time.Sleep(300 * time.Millisecond) // down for a while: several batches fail
				restarted <- srv.Start()
			}()
		}
		err := sink.Export(ctx, queue, entries)
		if err != nil {
			failed.Add(1)
		}
		return err
	})
	q, env := startQueue(t, 4, 20, wrapped)
	want := map[string]string{}
	for round := range 3 {
		for i := range 100 {
			k, v := fmt.Sprintf("k%03d", i), fmt.Sprintf("v%d-%d", round, i)
			if (i+round)%7 == 0 {
				v = ""
			}
			if err := put(context.Background(), env.DB(), q, k, v); err != nil {
				t.Fatal(err)
			}
			if v == "" {
				delete(want, k)
			} else {
				want[k] = v
			}
		}
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	drained(t, env, q)
	equalRows(t, live(t, srv.DSN(), "restarted"), want)
	if failed.Load() == 0 {
		t.Fatal("no batch failed: the server was not down while the queue drained")
	}
	if n := queued(t, env, q); n != 0 {
		t.Fatalf("%d entries still queued", n)
	}
	t.Logf("%d batches, %d failed while the server was down", calls.Load(), failed.Load())
}
