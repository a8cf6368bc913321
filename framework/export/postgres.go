package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ValueType is the column type a PostgresSink stores values in.
type ValueType string

const (
	// Bytea stores values as they are: any bytes.
	Bytea ValueType = "bytea"
	// JSONB stores values as jsonb, to be queried with PostgreSQL's JSON
	// operators: every value must be JSON (the web index's rows are).
	JSONB ValueType = "jsonb"
)

// PostgresOptions configure a PostgresSink. EnsureDefaults fills unset
// fields.
type PostgresOptions struct {
	// Table is the table the entries go to, created if missing: a name,
	// or schema.name, of lower-case letters, digits and '_' (starting
	// with a letter or '_'), at most 63 bytes each part. Default:
	// "trickle_export".
	Table string
	// Values is the type of the value column. Default: Bytea.
	Values ValueType
	// DeleteRows deletes the row of a key whose tombstone arrives,
	// instead of marking it deleted. The tombstone's key and sequence
	// number are kept in a side table, Table+"_deleted", so that an older
	// value delivered after the tombstone (a batch exported again after
	// a conflict) is still kept out; rows of that table may be deleted
	// once the queue holds no entry older than them. Default: false.
	DeleteRows bool
	// ConnectTimeout bounds each connection's dial and handshake (it
	// replaces the connection string's connect_timeout). Default: 10s.
	ConnectTimeout time.Duration
	// Timeout bounds one batch, its connection included, and the table's
	// creation: the batch fails after it, and stays in the queue. It is
	// also the statement_timeout of the sink's connections (unless the
	// connection string sets one), so that a statement the sink gave up
	// on, on a server it could not reach to cancel it, holds no lock for
	// longer. Default: 30s.
	Timeout time.Duration
	// MaxConns bounds the connections open at once: how many batches (of
	// different buckets) are written at once. Default: 4.
	MaxConns int
	// Logger receives diagnostics. Default: slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *PostgresOptions) EnsureDefaults() *PostgresOptions {
	if o.Table == "" {
		o.Table = "trickle_export"
	}
	if o.Values == "" {
		o.Values = Bytea
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxConns == 0 {
		o.MaxConns = 4
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports the first unusable field, wrapping ErrInvalidOptions.
func (o *PostgresOptions) Validate() error {
	if err := validTable(o.Table, o.DeleteRows); err != nil {
		return err
	}
	switch {
	case o.Values != Bytea && o.Values != JSONB:
		return fmt.Errorf("%w: Values %q: want %s or %s", ErrInvalidOptions, o.Values, Bytea, JSONB)
	case o.ConnectTimeout < 0:
		return fmt.Errorf("%w: ConnectTimeout %v must not be negative", ErrInvalidOptions, o.ConnectTimeout)
	case o.Timeout < 0:
		return fmt.Errorf("%w: Timeout %v must not be negative", ErrInvalidOptions, o.Timeout)
	case o.MaxConns < 1 || o.MaxConns > math.MaxInt32:
		return fmt.Errorf("%w: MaxConns %d must be positive", ErrInvalidOptions, o.MaxConns)
	}
	return nil
}

// validTable checks a table name: unquoted, so that it reads the same in
// the queries people write, and with room for the side table's suffix.
func validTable(table string, deleteRows bool) error {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return fmt.Errorf("%w: Table %q: want name or schema.name", ErrInvalidOptions, table)
	}
	for i, p := range parts {
		max := 63
		if i == len(parts)-1 && deleteRows {
			max -= len(deletedSuffix)
		}
		if p == "" || len(p) > max || (p[0] >= '0' && p[0] <= '9') || strings.TrimLeft(p, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
			return fmt.Errorf("%w: Table %q: want lower-case letters, digits and '_', not starting with a digit, at most %d bytes a part", ErrInvalidOptions, table, max)
		}
	}
	return nil
}

// deletedSuffix names the side table of tombstones under DeleteRows.
const deletedSuffix = "_deleted"

// PostgresError is a PostgresSink's failure, naming the server and the
// table, and saying whether the server did not answer in time.
type PostgresError struct {
	// Addr is the server's host:port.
	Addr string
	// Table is the sink's table.
	Table string
	// Op is what the sink was doing.
	Op string
	// Timeout is set when the server did not answer within it.
	Timeout time.Duration
	// Err is the cause.
	Err error
}

func (e *PostgresError) Error() string {
	if e.Timeout > 0 {
		return fmt.Sprintf("export: PostgreSQL at %s, table %s: %s: no answer within %v: %v", e.Addr, e.Table, e.Op, e.Timeout, e.Err)
	}
	return fmt.Sprintf("export: PostgreSQL at %s, table %s: %s: %v", e.Addr, e.Table, e.Op, e.Err)
}

func (e *PostgresError) Unwrap() error { return e.Err }

// PostgresSink upserts entries into a PostgreSQL table, a batch in one
// transaction, keeping per key the entry with the highest sequence number:
// the contract of the package, held by the database, so that any client
// may read the exported table with SQL. Its table (created if missing):
//
//	CREATE TABLE trickle_export (
//	    key        text PRIMARY KEY,  -- the entry's key
//	    value      bytea,             -- or jsonb (Values); NULL once deleted
//	    seq        bigint NOT NULL,   -- the sequence number of the entry the row holds
//	    deleted    boolean NOT NULL,  -- the last entry was a tombstone
//	    updated_at timestamptz NOT NULL
//	);
//
// A row changes only for an entry with a higher sequence number
// (INSERT … ON CONFLICT (key) DO UPDATE … WHERE excluded.seq > t.seq), so
// a batch exported again changes nothing and an older entry arriving
// late is ignored. A tombstone keeps the row, marked deleted with no
// value, so that an older value arriving after it is ignored too; a key
// re-added later takes the row back. With DeleteRows the row goes, and
// the tombstone is kept in a side table instead. Read the live rows with
//
//	SELECT key, value FROM trickle_export WHERE NOT deleted;
//
// Keys must be UTF-8 without zero bytes (they are text); an entry that
// is not fails its batch, naming the key. One sink (one table) serves
// one queue, or queues whose keys differ.
type PostgresSink struct {
	pool  *pgxpool.Pool
	opts  PostgresOptions
	addr  string
	table string // quoted
	sql   []string
}

// NewPostgresSink connects to the server of dsn and creates the sink's
// table if missing.
//
// dsn is a URL or key=value connection string. It fails within
// ConnectTimeout, or Timeout, with a PostgresError naming the server if it
// does not answer. An existing table whose columns are not
// the sink's is refused (ErrInvalidOptions).
func NewPostgresSink(ctx context.Context, dsn string, opts PostgresOptions) (*PostgresSink, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: PostgreSQL connection string: %w", ErrInvalidOptions, err)
	}
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	if _, ok := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !ok && opts.Timeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(opts.Timeout.Milliseconds(), 1), 10)
	}
	cfg.MaxConns = int32(opts.MaxConns)
	cfg.MinConns = 0
	s := &PostgresSink{opts: opts, addr: net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))}
	if strings.HasPrefix(cfg.ConnConfig.Host, "/") {
		s.addr = cfg.ConnConfig.Host // a unix socket's directory
	}
	s.table = pgx.Identifier(strings.Split(opts.Table, ".")).Sanitize()
	s.sql = upsertSQL(s.table, quotedDeleted(opts.Table), opts.Values, opts.DeleteRows)
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, s.fail("connecting", err, opts.ConnectTimeout)
	}
	if err := s.ensureTable(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

func quotedDeleted(table string) string {
	return pgx.Identifier(strings.Split(table+deletedSuffix, ".")).Sanitize()
}

// Table returns the name of the sink's table.
func (s *PostgresSink) Table() string { return s.opts.Table }

// Addr returns the host:port of the sink's server.
func (s *PostgresSink) Addr() string { return s.addr }

// Close closes the sink's connections.
func (s *PostgresSink) Close() { s.pool.Close() }

// fail wraps err as a PostgresError, saying so when the deadline passed.
func (s *PostgresSink) fail(op string, err error, timeout time.Duration) error {
	e := &PostgresError{Addr: s.addr, Table: s.opts.Table, Op: op, Err: err}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		e.Op, timeout = "connecting ("+op+")", min(timeout, s.opts.ConnectTimeout)
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		e.Timeout = timeout
	}
	return e
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ensureTable creates the table (and the side table) if missing, and
// checks the columns of one that exists.
func (s *PostgresSink) ensureTable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	ddl := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	key text PRIMARY KEY,
	value %s,
	seq bigint NOT NULL,
	deleted boolean NOT NULL DEFAULT false,
	updated_at timestamptz NOT NULL DEFAULT now()
)`, s.table, s.opts.Values)
	if s.opts.DeleteRows {
		ddl += fmt.Sprintf(`;
CREATE TABLE IF NOT EXISTS %s (
	key text PRIMARY KEY,
	seq bigint NOT NULL,
	deleted_at timestamptz NOT NULL DEFAULT now()
)`, quotedDeleted(s.opts.Table))
	}
	// Two sinks creating one table at once may both try; the loser's
	// error is a unique violation on the catalog, and the table exists.
	for attempt := 0; ; attempt++ {
		_, err := s.pool.Exec(ctx, ddl)
		if err == nil {
			break
		}
		var pe *pgconn.PgError
		if attempt == 0 && errors.As(err, &pe) && pe.Code == "23505" {
			continue
		}
		return s.fail("creating the table", err, s.opts.Timeout)
	}
	want := map[string]string{"key": "text", "value": string(s.opts.Values), "seq": "bigint", "deleted": "boolean", "updated_at": "timestamp with time zone"}
	rows, err := s.pool.Query(ctx, `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, s.table)
	if err != nil {
		return s.fail("reading the table's columns", err, s.opts.Timeout)
	}
	have := map[string]string{}
	var name, typ string
	if _, err := pgx.ForEachRow(rows, []any{&name, &typ}, func() error { have[name] = typ; return nil }); err != nil {
		return s.fail("reading the table's columns", err, s.opts.Timeout)
	}
	for col, typ := range want {
		if have[col] != typ {
			return fmt.Errorf("%w: PostgreSQL at %s: table %s exists with column %s of type %q, want %s (a table made for other values, or by something else)",
				ErrInvalidOptions, s.addr, s.opts.Table, col, have[col], typ)
		}
	}
	return nil
}

// upsertSQL is the statements of a batch. Each takes arrays, one element
// a key: a batch is one round trip of a few statements whatever its size.
// The values come as text for jsonb (cast on the server), as bytea else.
func upsertSQL(table, deleted string, values ValueType, deleteRows bool) []string {
	valueArg, value := "$2::bytea[]", "u.value"
	if values == JSONB {
		valueArg, value = "$2::text[]", "u.value::jsonb"
	}
	upsert := `INSERT INTO ` + table + ` AS t (key, value, seq, deleted, updated_at)
	SELECT u.key, ` + value + `, u.seq, u.deleted, now()
	FROM unnest($1::text[], ` + valueArg + `, $3::bigint[], $4::boolean[]) AS u(key, value, seq, deleted)`
	conflict := `
	ON CONFLICT (key) DO UPDATE SET value = excluded.value, seq = excluded.seq, deleted = excluded.deleted, updated_at = excluded.updated_at
	WHERE excluded.seq > t.seq`
	if !deleteRows {
		return []string{upsert + conflict}
	}
	return []string{
		// The tombstones first: kept, highest sequence number winning.
		`INSERT INTO ` + deleted + ` AS d (key, seq, deleted_at)
	SELECT key, seq, now() FROM unnest($1::text[], $2::bigint[]) AS u(key, seq)
	ON CONFLICT (key) DO UPDATE SET seq = excluded.seq, deleted_at = excluded.deleted_at WHERE excluded.seq > d.seq`,
		// Then the rows they delete, those older than them.
		`DELETE FROM ` + table + ` AS t USING unnest($1::text[], $2::bigint[]) AS u(key, seq)
	WHERE t.key = u.key AND t.seq < u.seq`,
		// Then the values, but none older than a kept tombstone.
		upsert + `
	WHERE NOT EXISTS (SELECT FROM ` + deleted + ` d WHERE d.key = u.key AND d.seq >= u.seq)` + conflict,
	}
}

// Export writes entries in one transaction, committed before it returns
// nil; an error (within Timeout) rolls the whole batch back, and the queue
// exports it again.
func (s *PostgresSink) Export(ctx context.Context, queue string, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	args, err := s.arguments(entries)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	op := fmt.Sprintf("writing %d entries of queue %s from %s", len(entries), queue, entries[0])
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		if s.opts.DeleteRows {
			b.Queue(s.sql[0], args.delKeys, args.delSeqs)
			b.Queue(s.sql[1], args.delKeys, args.delSeqs)
			b.Queue(s.sql[2], args.keys, args.values, args.seqs, args.deleted)
		} else {
			b.Queue(s.sql[0], args.keys, args.values, args.seqs, args.deleted)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return s.fail(op, err, s.opts.Timeout)
	}
	return nil
}

// batchArgs are a batch's arrays: one element per key (its entry with the
// highest sequence number), the tombstones apart under DeleteRows.
type batchArgs struct {
	keys    []string
	values  any // [][]byte or []*string
	seqs    []int64
	deleted []bool
	delKeys []string
	delSeqs []int64
}

// arguments checks entries and makes the batch's arrays. A key appears
// once: a statement may not change a row twice, and of a key's entries
// only the one with the highest sequence number counts.
func (s *PostgresSink) arguments(entries []Entry) (*batchArgs, error) {
	last := make(map[string]int, len(entries)) // the entry kept for each key
	order := make([]string, 0, len(entries))
	for i, e := range entries {
		k := string(e.Key)
		if j, ok := last[k]; ok {
			if e.Seq > entries[j].Seq {
				last[k] = i
			}
			continue
		}
		if !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 {
			return nil, fmt.Errorf("%w: PostgreSQL table %s: key %q is not UTF-8 text without zero bytes", ErrInvalidEntry, s.opts.Table, e.Key)
		}
		if e.Seq > math.MaxInt64 {
			return nil, fmt.Errorf("%w: PostgreSQL table %s: entry %s: sequence number beyond bigint", ErrInvalidEntry, s.opts.Table, e)
		}
		last[k] = i
		order = append(order, k)
	}
	a := &batchArgs{keys: make([]string, 0, len(order)), seqs: make([]int64, 0, len(order)), deleted: make([]bool, 0, len(order))}
	var blobs [][]byte
	var texts []*string
	for _, k := range order { // in the batch's key order: concurrent batches lock rows in one order
		e := entries[last[k]]
		if e.Delete && s.opts.DeleteRows {
			a.delKeys, a.delSeqs = append(a.delKeys, k), append(a.delSeqs, int64(e.Seq))
			continue
		}
		a.keys, a.seqs, a.deleted = append(a.keys, k), append(a.seqs, int64(e.Seq)), append(a.deleted, e.Delete)
		switch {
		case s.opts.Values == Bytea && e.Delete:
			blobs = append(blobs, nil)
		case s.opts.Values == Bytea:
			blobs = append(blobs, nonNil(e.Value))
		case e.Delete:
			texts = append(texts, nil)
		default:
			if !json.Valid(e.Value) {
				return nil, fmt.Errorf("%w: PostgreSQL table %s of jsonb values: entry %s is not JSON", ErrInvalidEntry, s.opts.Table, e)
			}
			v := string(e.Value)
			texts = append(texts, &v)
		}
	}
	if s.opts.Values == Bytea {
		a.values = blobs
	} else {
		a.values = texts
	}
	return a, nil
}

// nonNil keeps an empty value apart from a tombstone's NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Rows reads the sink's table back, calling fn with each row as an entry
// (a tombstone for a deleted row, and under DeleteRows for each kept
// tombstone) in key order: for checks and tools, as Table serves a
// stream's consumer. A jsonb value comes back as PostgreSQL writes it,
// which may space and order its fields differently.
func (s *PostgresSink) Rows(ctx context.Context, fn func(Entry) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	q := "SELECT key, value" + map[ValueType]string{Bytea: "", JSONB: "::text"}[s.opts.Values] + ", seq, deleted FROM " + s.table
	if s.opts.DeleteRows {
		q += " UNION ALL SELECT key, NULL, seq, true FROM " + quotedDeleted(s.opts.Table)
	}
	rows, err := s.pool.Query(ctx, q+" ORDER BY key, seq")
	if err != nil {
		return s.fail("reading the table", err, s.opts.Timeout)
	}
	var key string
	var value []byte
	var seq int64
	var deleted bool
	_, err = pgx.ForEachRow(rows, []any{&key, &value, &seq, &deleted}, func() error {
		e := Entry{Key: []byte(key), Seq: uint64(seq), Delete: deleted}
		if !deleted {
			e.Value = nonNil(bytes.Clone(value))
		}
		return fn(e)
	})
	if err != nil && ctx.Err() != nil {
		return s.fail("reading the table", err, s.opts.Timeout)
	}
	return err
}
