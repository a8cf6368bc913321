package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/cmd/internal/cli"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/runner"
)

// exportFlags say whether and where the web index exports its canonical
// table (-export, -export-stream, -export-subject, -export-bucket,
// -export-tombstone-age, -export-dsn).
type exportFlags struct {
	mode, stream, subject, bucket, dsn string
	tombstoneAge                       time.Duration
}

// exportQueue is the name of the web index's export queue: its subjects
// are under the -export-subject prefix followed by it.
const exportQueue = "webindex"

// exportTable is the PostgreSQL table the web index exports to under
// -export postgres: its rows' values are the CanonicalRow JSON.
const exportTable = "webindex_export"

func (f *exportFlags) register(fs *cli.Flags) {
	fs.StringVar(&f.mode, "export", "off", "export the web index's canonical table (URL, title, canonical, inbound count, rank; deleted pages as tombstones): off; jetstream (a compacted JetStream stream on the deployment's NATS, one subject per page); kv (a NATS KV bucket, one key per page); or postgres (the table "+exportTable+" of -export-dsn); every runner of a deployment must say the same")
	fs.Env("export", "TRICKLE_EXPORT")
	fs.StringVar(&f.stream, "export-stream", "TRICKLE_EXPORT", "export jetstream: the stream, created if missing (file storage, one message per subject); one of an earlier release is made compacted")
	fs.Env("export-stream", "TRICKLE_EXPORT_STREAM")
	fs.StringVar(&f.subject, "export-subject", "trickle.export", "export jetstream: the subject prefix; the web index publishes page P on PREFIX."+exportQueue+".TOKEN(P)")
	fs.Env("export-subject", "TRICKLE_EXPORT_SUBJECT")
	fs.StringVar(&f.dsn, "export-dsn", "", "export postgres: the PostgreSQL connection string (postgres://user:password@host:5432/db or key=value pairs); the table "+exportTable+" is created if missing")
	fs.Env("export-dsn", "TRICKLE_EXPORT_DSN")
	fs.StringVar(&f.bucket, "export-bucket", exportQueue, "export kv: the KV bucket, created if missing (history 1)")
	fs.Env("export-bucket", "TRICKLE_EXPORT_BUCKET")
	fs.DurationVar(&f.tombstoneAge, "export-tombstone-age", 24*time.Hour, "export jetstream, kv: how long a deleted page's tombstone stays in the stream or bucket; a consumer away longer must read the table again")
	fs.Env("export-tombstone-age", "TRICKLE_EXPORT_TOMBSTONE_AGE")
}

// enabled reports whether export is on, and checks the mode.
func (f *exportFlags) enabled() (bool, error) {
	switch f.mode {
	case "off", "":
		return false, nil
	case "jetstream", "kv":
		return true, nil
	case "postgres":
		if f.dsn == "" {
			return false, errors.New("-export postgres: -export-dsn (TRICKLE_EXPORT_DSN) is required")
		}
		return true, nil
	}
	return false, fmt.Errorf("-export %q: want off, jetstream, kv or postgres", f.mode)
}

func (f *exportFlags) jetStream() export.JetStreamOptions {
	return export.JetStreamOptions{Stream: f.stream, Subject: f.subject, TombstoneAge: f.tombstoneAge}
}

func (f *exportFlags) postgres() export.PostgresOptions {
	return export.PostgresOptions{Table: exportTable, Values: export.JSONB}
}

// describe names where the entries go, for status pages: the DSN's host,
// not the DSN, which may hold a password.
func (f *exportFlags) describe() string {
	if f.mode == "postgres" {
		where := ""
		if c, err := pgconn.ParseConfig(f.dsn); err == nil {
			where = fmt.Sprintf(" at %s:%d, database %s", c.Host, c.Port, c.Database)
		}
		return "PostgreSQL table " + exportTable + where
	}
	if f.mode == "kv" {
		return fmt.Sprintf("NATS KV bucket %s", f.bucket)
	}
	return fmt.Sprintf("JetStream stream %s, subjects %s.%s.>", f.stream, f.subject, exportQueue)
}

// deferredSink is the export queue's sink before the runner is connected:
// the queue is part of the registry the runner starts with, its JetStream
// sink needs the runner's connection. Observers run only once the runner
// runs, after connect.
type deferredSink struct {
	sink atomic.Pointer[connectedSink]
}

// connectedSink is the sink connect made.
type connectedSink struct{ export.Sink }

// errNotConnected fails an export tried before connect (never, when the
// runner connects the sink before it runs).
var errNotConnected = errors.New("export: the sink is not connected yet")

// Export hands entries to the sink once connected.
func (d *deferredSink) Export(ctx context.Context, queue string, entries []export.Entry) error {
	s := d.sink.Load()
	if s == nil {
		return errNotConnected
	}
	return s.Export(ctx, queue, entries)
}

// close closes the connected sink if it holds connections of its own (a
// PostgreSQL sink's pool); the NATS sinks use the runner's connection.
// A nil sink (no export) closes nothing.
func (d *deferredSink) close() {
	if d == nil {
		return
	}
	if s := d.sink.Load(); s != nil {
		if c, ok := s.Sink.(interface{ Close() }); ok {
			c.Close()
		}
	}
}

// connect makes the sink of -export: publishing over nc, creating its
// stream or bucket if missing, or writing to PostgreSQL, creating its
// table if missing.
func (d *deferredSink) connect(ctx context.Context, nc *nats.Conn, f *exportFlags) error {
	var s export.Sink
	var err error
	switch f.mode {
	case "postgres":
		s, err = export.NewPostgresSink(ctx, f.dsn, f.postgres())
	case "kv":
		if nc == nil {
			return errors.New("export: this runner has no NATS connection")
		}
		s, err = export.NewKVSink(ctx, nc, export.KVOptions{Bucket: f.bucket, TombstoneAge: f.tombstoneAge})
	default:
		if nc == nil {
			return errors.New("export: this runner has no NATS connection")
		}
		s, err = export.NewJetStreamSink(ctx, nc, f.jetStream())
	}
	if err != nil {
		return err
	}
	d.sink.Store(&connectedSink{s})
	return nil
}

// exportingIndex returns the web index with its export queue draining to
// a sink to connect once the runner is up.
func exportingIndex() (*webindex.Index, *export.Queue, *deferredSink, error) {
	sink := &deferredSink{}
	q, err := export.New(export.Options{Name: exportQueue, Sink: sink})
	if err != nil {
		return nil, nil, nil, err
	}
	ix, err := webindex.New(&webindex.Options{Export: q})
	return ix, q, sink, err
}

// printExportStatus prints what the web index's export queue holds.
func printExportStatus(ctx context.Context, node *runner.Node, f *exportFlags, w io.Writer) error {
	q, err := export.New(export.Options{Name: exportQueue})
	if err != nil {
		return err
	}
	db, err := node.OpenDB(ctx, nil)
	if err != nil {
		return err
	}
	s, err := q.Status(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "export queue %s (observer %s, to %s): %d entries waiting (%d tombstones)",
		s.Queue, s.Observer, f.describe(), s.Entries, s.Tombstones)
	if s.Entries > 0 {
		fmt.Fprintf(w, ", the oldest since %s (%v ago)", s.Oldest.Local().Format(time.RFC3339), time.Since(s.Oldest).Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	return nil
}
