// Package export gets results out of the store to the systems people query
// (a search cluster, a cache, a warehouse, a stream), reliably: the
// pattern of Apache Fluo's ExportQueue.
//
// Writing to an external system from inside an observer is easy to get
// wrong: the observer may run twice, run for a transaction that then
// aborts, or deliver updates out of order. With a Queue, a transaction
// adds an export entry (Add, or Delete for a tombstone) atomically with
// its own writes: the entry exists if and only if the transaction
// committed. The queue's observer then drains the entries to a Sink in
// batches and deletes them in the same transaction, so an entry leaves the
// queue only once the sink has taken it, and is offered again if the sink
// failed or the process died in between.
//
// # Entries, buckets and sequence numbers
//
// An entry carries the key it updates, a value (or a tombstone), and a
// sequence number: the start timestamp of the transaction that added it.
// Entries are spread over Options.Buckets buckets by a hash of their key,
// each bucket a row of Options.Table whose cells are the entries, keyed by
// key and sequence number. Every entry is a cell of its own, so adding
// entries never conflicts, however hot a key is; and each bucket has its
// own weak notification, so the buckets drain in parallel, a burst of
// additions to one bucket costing one drain.
//
// # Delivery: the contract a Sink keeps
//
// The observer reads up to Options.BatchSize entries of a bucket (and
// about Options.BatchBytes), in key order and, within a key, in sequence
// order, hands them to Sink.Export in one call, and deletes them in the
// same transaction; if more remain it notifies itself to take the next
// batch, continuing where this one stopped so that no key waits behind
// another. Delivery is at least once: an entry is exported again if the
// sink failed (the observer's error leaves every entry in place, and the
// runner retries with exponential backoff, listing the failure in
// `runner status` meanwhile, with its last error), if the commit that
// deletes the batch conflicted with another drain of the bucket, or if
// the process died between the sink's answer and the commit. Nothing is
// dropped: an entry leaves the queue only in the transaction that
// exported it.
//
// So a sink must be idempotent and keep, per key, the entry with the
// highest sequence number: apply an entry only if its sequence number is
// above the one it holds for the key (a tombstone included, so that a
// late re-delivery of an older value does not resurrect a deleted key).
// Entries of a key come in sequence order, within a batch and from batch
// to batch, when the transactions that add entries for one key conflict
// with each other (they write a cell in common, as transactions deriving a
// key's value from the same state do): of two such transactions the one
// that commits later started after the other committed, so it has the
// higher sequence number and its entry is seen after. Transactions that
// add entries for one key without conflicting may commit in the other
// order; last-sequence-wins then keeps the entry of the one that started
// last. Two entries for one key added by one transaction are one: the
// second replaces the first.
//
// A drained entry stays in its bucket, deleted, until garbage collection
// removes it (see the runner's -gc-interval). A drain that continues a
// bucket's backlog seeks past what the previous drain took, so it does
// not step over those again; a drain from the bucket's start steps over
// the deleted entries not collected yet, once per pass through the
// bucket: more buckets make that step shorter.
//
// Package framework/export provides three sinks: SinkFunc, a function;
// JetStreamSink, a compacted changelog in a NATS JetStream stream, one
// subject per key, in which an older entry never replaces a newer one;
// KVSink, the table in a NATS KV bucket; and PostgresSink, which upserts
// each batch into a PostgreSQL table in one transaction, a row changing
// only for a higher sequence number.
package export

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/trickle-dev/trickle/framework"
)

// Entry is one export: the latest value of Key as of the transaction
// that added it, or its deletion.
type Entry struct {
	// Key names what the entry updates, in the sink's terms (a document
	// id, a URL).
	Key []byte
	// Seq is the start timestamp of the transaction that added the entry:
	// a sink keeps, per key, the entry with the highest.
	Seq uint64
	// Value is the key's new value; nil for a tombstone.
	Value []byte
	// Delete marks a tombstone: the key was deleted.
	Delete bool
}

// String names the entry for messages.
func (e Entry) String() string {
	if e.Delete {
		return fmt.Sprintf("delete %q@%d", e.Key, e.Seq)
	}
	return fmt.Sprintf("%q@%d (%d bytes)", e.Key, e.Seq, len(e.Value))
}

// Sink receives the entries of a queue, a batch at a time. It must keep
// the contract in the package documentation: idempotent, last sequence
// number wins per key.
type Sink interface {
	// Export delivers entries of queue, in key order and within a key in
	// sequence order. It returns nil only once every entry is stored
	// where the sink stores it (a stream's acknowledgement): then the
	// queue deletes them. An error leaves them all in the queue, to be
	// exported again; a sink that stored some of them before failing
	// will see those again. ctx ends when the runner shuts down.
	Export(ctx context.Context, queue string, entries []Entry) error
}

// SinkFunc is a Sink that is a function: for tests, and for sinks whose
// client is a function call (an HTTP PUT, a SQL upsert).
type SinkFunc func(ctx context.Context, queue string, entries []Entry) error

// Export calls f.
func (f SinkFunc) Export(ctx context.Context, queue string, entries []Entry) error {
	return f(ctx, queue, entries)
}

// Errors of the package. Test for them with errors.Is.
var (
	// ErrInvalidOptions is wrapped by New's error for unusable Options.
	ErrInvalidOptions = errors.New("export: invalid options")
	// ErrInvalidEntry is wrapped by Add's and Delete's error for a key
	// the queue cannot hold (empty, or longer than MaxKeyBytes).
	ErrInvalidEntry = errors.New("export: invalid entry")
	// ErrSink is wrapped by the observer's error when the sink failed:
	// the batch stays in the queue and is exported again after a backoff.
	ErrSink = errors.New("export: sink failed")
	// ErrCorrupt is wrapped by errors about a stored entry or bucket
	// this package did not write.
	ErrCorrupt = errors.New("export: corrupt queue entry")
)

// MaxKeyBytes bounds an entry's key: keys are parts of the store's cell
// names and of the messages a stream carries.
const MaxKeyBytes = 16 << 10

// MaxBuckets bounds Options.Buckets: a bucket's number takes two bytes of
// its row.
const MaxBuckets = 1 << 16

// Options configure a Queue. Name and, for the observer, Sink are
// required; EnsureDefaults fills the rest.
type Options struct {
	// Name identifies the queue: its observer is "export-"+Name, its rows
	// start with Name, and the JetStream sink publishes it on a subject
	// of that name. Letters, digits, '-' and '_' only. Required.
	Name string
	// Table holds the queue's buckets. Several queues may share it.
	// Default: "export".
	Table string
	// Buckets is how many buckets entries spread over: how many drains
	// may run at once, and how many rows the deleted entries are spread
	// over until garbage collection removes them. Every process adding to
	// the queue must use the same number. Default: 16; at most MaxBuckets.
	Buckets int
	// BatchSize bounds the entries one drain hands to the sink. Default:
	// 1000.
	BatchSize int
	// BatchBytes bounds about how many bytes of keys and values one drain
	// reads and hands to the sink (a batch holds at least one entry,
	// whatever its size). Default: 4 MiB.
	BatchBytes int
	// Sink receives the entries. Required by Register (the observer); a
	// process that only adds entries needs none.
	Sink Sink
	// OrderByKey has Add and Delete also write a cell of the key's own
	// (in its bucket's row, family "o", holding the sequence number), so
	// that two transactions exporting one key always write a cell in
	// common: one of them conflicts and runs again, and the entry of the
	// one that commits later has the higher sequence number. Without it
	// that holds only when the transactions exporting a key share a cell
	// by themselves (the web index's do: each writes the page's row), and
	// two that do not may leave the entry of the one that started later,
	// not the one that committed later. It costs a cell written with each
	// entry and one kept per key. Every process adding to the queue must
	// say the same. Default: off.
	OrderByKey bool
	// Logger receives diagnostics. Default: slog.Default().
	Logger *slog.Logger
	// MeterProvider receives the queue's metrics
	// (trickle_export_entries_total, trickle_export_batches_total,
	// trickle_export_sink_duration_seconds). Default: the global provider.
	MeterProvider metric.MeterProvider
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Table == "" {
		o.Table = "export"
	}
	if o.Buckets == 0 {
		o.Buckets = 16
	}
	if o.BatchSize == 0 {
		o.BatchSize = 1000
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = 4 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	return o
}

// Validate reports the first unusable field, wrapping ErrInvalidOptions.
func (o *Options) Validate() error {
	switch {
	case o.Name == "":
		return fmt.Errorf("%w: Name is required", ErrInvalidOptions)
	case !validName(o.Name):
		return fmt.Errorf("%w: Name %q: want letters, digits, '-' and '_' only", ErrInvalidOptions, o.Name)
	case o.Buckets < 1 || o.Buckets > MaxBuckets:
		return fmt.Errorf("%w: Buckets %d: want 1 to %d", ErrInvalidOptions, o.Buckets, MaxBuckets)
	case o.BatchSize < 1:
		return fmt.Errorf("%w: BatchSize %d must be positive", ErrInvalidOptions, o.BatchSize)
	case o.BatchBytes < 1:
		return fmt.Errorf("%w: BatchBytes %d must be positive", ErrInvalidOptions, o.BatchBytes)
	}
	if strings.HasPrefix(o.Table, "__") {
		return fmt.Errorf("%w: Table %q: names starting with \"__\" belong to the framework", ErrInvalidOptions, o.Table)
	}
	return nil
}

func validName(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
		default:
			return false
		}
	}
	return true
}

// The cells of a queue. A bucket is the row Name 0x00 bucket (two bytes,
// big-endian) of Options.Table; its entries are the cells of entryFamily
// whose qualifier is the key (escaped, see entryColumn) followed by the
// sequence number (eight bytes, big-endian), so a scan of the row meets
// them in key order and a key's in sequence order; their value is an op
// byte and the value. The
// row's notifyColumn is the drain's weak notification, and afterColumn,
// when present, the qualifier of the last entry the previous drain took:
// the next drain's scan starts after it. nextColumn is the cursor of
// earlier releases, the qualifier the next drain started at, read and
// removed. With Options.OrderByKey, orderFamily holds a cell per key (its
// qualifier), rewritten by every entry of the key, which no drain reads.
const (
	entryFamily = "e"
	orderFamily = "o"
	opPut       = 0
	opDelete    = 1
)

var (
	afterColumn = framework.Column{Family: "m", Qualifier: "after"}
	nextColumn  = framework.Column{Family: "m", Qualifier: "next"}
)

func notifyColumn(name string) framework.Column {
	return framework.Column{Family: "n", Qualifier: name}
}

// Queue is an export queue: Add and Delete put entries in it inside
// transactions, and its observer (Register) drains them to the sink.
type Queue struct {
	opts    Options
	notify  framework.Column
	metrics *metrics
}

// New returns a queue with opts.
func New(opts Options) (*Queue, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	q := &Queue{opts: opts, notify: notifyColumn(opts.Name)}
	q.metrics = newMetrics(opts.MeterProvider, opts.Name, opts.Logger)
	return q, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.opts.Name }

// Observer returns the name of the queue's observer: "export-" and the
// queue's name. Failures of its sink are listed under it.
func (q *Queue) Observer() string { return "export-" + q.opts.Name }

// Register adds the queue's observer to reg: a weak observer of each
// bucket's notification, which drains the bucket to the sink. A process
// that only adds entries registers it too, so that its additions notify
// the observer (or opens its DB on the columns the runners published).
// It fails with ErrInvalidOptions if the queue has no Sink.
func (q *Queue) Register(reg *framework.Registry) error {
	if q.opts.Sink == nil {
		return fmt.Errorf("%w: queue %s: the observer needs a Sink", ErrInvalidOptions, q.opts.Name)
	}
	return reg.Register(framework.Observer{
		Name: q.Observer(), Table: q.opts.Table, Columns: []framework.Column{q.notify}, Kind: framework.Weak, Fn: q.drain,
	})
}

// Add puts an entry for key with value in the queue, in tx: it is
// exported if and only if tx commits, with tx's start timestamp as its
// sequence number. A second Add or Delete of key in tx replaces the
// first. Sequence order is commit order for one key only when the
// transactions exporting it conflict: they write a cell in common, or
// the queue has Options.OrderByKey.
func (q *Queue) Add(tx *framework.Txn, key, value []byte) error {
	return q.add(tx, key, opPut, value)
}

// Delete puts a tombstone for key in the queue, in tx: the sink is told
// that key was deleted.
func (q *Queue) Delete(tx *framework.Txn, key []byte) error {
	return q.add(tx, key, opDelete, nil)
}

func (q *Queue) add(tx *framework.Txn, key []byte, op byte, value []byte) error {
	switch {
	case len(key) == 0:
		return fmt.Errorf("%w: queue %s: empty key", ErrInvalidEntry, q.opts.Name)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: queue %s: key of %d bytes (at most %d)", ErrInvalidEntry, q.opts.Name, len(key), MaxKeyBytes)
	}
	seq := tx.StartTs()
	if seq == 0 {
		return fmt.Errorf("export: queue %s: the transaction has no start timestamp (the oracle was unreachable)", q.opts.Name)
	}
	row := q.bucketRow(q.bucketOf(key))
	v := make([]byte, 0, 1+len(value))
	v = append(append(v, op), value...)
	if err := tx.Set(q.opts.Table, row, entryColumn(key, seq), v); err != nil {
		return err
	}
	if q.opts.OrderByKey {
		if err := tx.Set(q.opts.Table, row, framework.Column{Family: orderFamily, Qualifier: string(key)}, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
			return err
		}
	}
	return tx.NotifyWeak(q.opts.Table, row, q.notify)
}

// bucketOf is the bucket of key: FNV-1a, stable across processes and
// releases.
func (q *Queue) bucketOf(key []byte) int {
	h := fnv.New64a()
	h.Write(key)
	return int(h.Sum64() % uint64(q.opts.Buckets))
}

// bucketRow is the row of bucket b.
func (q *Queue) bucketRow(b int) []byte {
	row := make([]byte, 0, len(q.opts.Name)+3)
	row = append(append(row, q.opts.Name...), 0)
	return binary.BigEndian.AppendUint16(row, uint16(b))
}

// entryColumn is the cell of key's entry with sequence number seq: its
// qualifier is the key, each zero byte written 0x00 0xff and ended by
// 0x00 0x01, then the sequence number, so that qualifiers sort by key
// (a key before every longer key it is a prefix of), then by sequence
// number.
func entryColumn(key []byte, seq uint64) framework.Column {
	q := make([]byte, 0, len(key)+10)
	for {
		i := bytes.IndexByte(key, 0)
		if i < 0 {
			break
		}
		q = append(append(q, key[:i]...), 0, 0xff)
		key = key[i+1:]
	}
	q = append(append(q, key...), 0, 1)
	q = binary.BigEndian.AppendUint64(q, seq)
	return framework.Column{Family: entryFamily, Qualifier: string(q)}
}

// decodeEntry reads the entry a cell of entryFamily holds.
func decodeEntry(col framework.Column, value []byte) (Entry, error) {
	bad := func() (Entry, error) {
		return Entry{}, fmt.Errorf("%w: cell %q of %d bytes", ErrCorrupt, col, len(value))
	}
	q := []byte(col.Qualifier)
	if len(q) < 10 || len(value) == 0 || value[0] > opDelete {
		return bad()
	}
	var key []byte
	for {
		i := bytes.IndexByte(q, 0)
		if i < 0 || i+1 >= len(q) {
			return bad()
		}
		key = append(key, q[:i]...)
		if q[i+1] == 1 {
			q = q[i+2:]
			break
		}
		if q[i+1] != 0xff {
			return bad()
		}
		key = append(key, 0)
		q = q[i+2:]
	}
	if len(q) != 8 || len(key) == 0 {
		return bad()
	}
	e := Entry{Key: key, Seq: binary.BigEndian.Uint64(q)}
	if value[0] == opDelete {
		e.Delete = true
	} else {
		e.Value = append([]byte{}, value[1:]...)
	}
	return e, nil
}
