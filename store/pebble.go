package store

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/trickle-dev/trickle/internal/keys"
)

// DB is the pebble-backed Store: one pebble database holding every table,
// with locality groups as disjoint key ranges (see package keys for the key
// layout). It is safe for concurrent use.
type DB struct {
	pdb     *pebble.DB
	popts   *pebble.Options // as opened, defaults filled in (Ingest writes sstables with them)
	dir     string          // pebble's directory in popts.FS
	log     *slog.Logger
	layout  *layout
	syncOK  bool // whether Apply may sync (false under DurabilityNone)
	latches *latches
	// pending are the rows of ApplyAtomic calls whose writes readers must
	// wait for.
	pending pendingRows
	// sp names the cell of the safe point (Options.SafePoint), and
	// safePoint is its value: row transactions below it are refused.
	sp        safePoint
	safePoint atomic.Uint64

	// mu guards closed and active: operations register in active so Close
	// can wait for them instead of pulling pebble out from under them.
	mu        sync.Mutex
	closed    bool
	active    int
	idle      sync.Cond // signalled when active drops to 0 after closed
	closeOnce sync.Once
	closeErr  error

	hooks testHooks
}

// testHooks are set only by tests (see export_test.go), before the DB is
// used concurrently.
type testHooks struct {
	// visit is called with every raw key an iterator lands on, including
	// keys pebble examines internally (through IterOptions.SkipPoint). The
	// key is only valid during the call.
	visit func(key []byte)
	// seek is called with the target of every seek an operation issues.
	seek func(target []byte)
	// afterChecks is called by Apply, and by ApplyAll for each of its row
	// transactions, with the row latch held, after the checks were
	// evaluated and before the mutations are committed.
	afterChecks func(txn *RowTxn)
	// afterRead is called by ReadRows after it read reads[i].
	afterRead func(i int)
	// commit is called by Apply and ApplyAll right before they commit a
	// batch, with whether the commit syncs.
	commit func(sync bool)
	// sortedIngest is called by Ingest when a request is not in key
	// order and is sorted before it is written.
	sortedIngest func()
}

var _ Store = (*DB)(nil)

// bloomPolicy is the filter every sstable gets: 10 bits per column prefix,
// about a 1% false-positive rate.
var bloomPolicy = bloom.FilterPolicy(10)

// Open opens (creating if needed) the store in dir. opts may be nil; it is
// copied, so the caller may reuse it. Open fails with ErrGroupLayout if
// opts.Groups disagrees with the layout persisted by an earlier Open.
func Open(dir string, opts *Options) (*DB, error) {
	return open(dir, opts, nil)
}

// open is Open; tweak, if not nil, adjusts the pebble options (tests use it
// to shape the LSM).
func open(dir string, opts *Options, tweak func(*pebble.Options)) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cache := pebble.NewCache(o.CacheSize)
	defer cache.Unref()
	po := &pebble.Options{
		FS:                 o.FS,
		Cache:              cache,
		MemTableSize:       uint64(o.MemTableSize),
		Comparer:           comparer,
		Logger:             pebbleLogger{o.Logger.With("component", "pebble")},
		FormatMajorVersion: pebble.FormatNewest,
	}
	// Bloom filters of column prefixes (see comparer) on every level, so
	// that a prefix seek or Get only reads sstables that may hold the
	// column. Pebble consults the last level's only for iterators that ask
	// (see openCursor).
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloomPolicy
	}
	po.Experimental.SpanPolicyFunc = inPlaceValues
	if tweak != nil {
		tweak(po)
	}
	pdb, err := pebble.Open(dir, po)
	if err != nil {
		return nil, explainOpenError(o.FS, dir, err)
	}
	l, err := loadLayout(pdb, o.Groups, o.Logger)
	if err != nil {
		pdb.Close()
		return nil, err
	}
	popts := po.Clone()
	popts.EnsureDefaults()
	db := &DB{
		pdb:     pdb,
		popts:   popts,
		dir:     dir,
		log:     o.Logger,
		layout:  l,
		syncOK:  o.Durability == DurabilitySynced,
		latches: newLatches(),
	}
	db.idle.L = &db.mu
	if sp := o.SafePoint; sp != nil {
		db.sp.cell = &SafePointCell{Table: sp.Table, Row: bytes.Clone(sp.Row), Column: sp.Column}
	}
	if err := db.loadSafePoint(); err != nil {
		pdb.Close()
		return nil, err
	}
	db.log.Debug("store: opened", "dir", dir, "durability", o.Durability, "groups", l.Groups)
	return db, nil
}

// inPlaceValues is the pebble span policy of the whole key space: every
// value stays next to its key. Pebble moves the values of all but the
// first version of a key prefix (here: a column) into value blocks, which
// is right where the first version is the one read; but a transaction
// reads a column's lock and newest write record, then the data record its
// write points at, always an older version: in a value block, each long
// value read was one more block read. Value blocks also hold a buffer per
// block until their sstable is finished, which was a quarter of all bytes
// allocated while indexing a corpus. The price is locality: a row's small
// cells now share data blocks with the long values between them, so a
// read of the small cells of many rows touches more blocks while they are
// not cached (long values belong in a locality group of their own).
func inPlaceValues([]byte) (pebble.SpanPolicy, []byte, error) {
	return pebble.SpanPolicy{DisableValueSeparationBySuffix: true}, nil, nil
}

// Close waits for in-flight operations (including scans being consumed) to
// finish, then closes pebble. Operations started after Close began fail with
// ErrClosed. Close is idempotent: later calls return the first call's result.
// Writes made with NoSync are synced by a clean Close.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.mu.Lock()
		db.closed = true
		for db.active > 0 {
			db.idle.Wait()
		}
		db.mu.Unlock()
		if err := db.pdb.Close(); err != nil {
			db.closeErr = fmt.Errorf("store: closing: %w", err)
		}
	})
	return db.closeErr
}

// acquire registers an operation; it fails if the store is closed.
func (db *DB) acquire() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return ErrClosed
	}
	db.active++
	return nil
}

// release ends an operation registered by acquire.
func (db *DB) release() {
	db.mu.Lock()
	db.active--
	if db.active == 0 && db.closed {
		db.idle.Broadcast()
	}
	db.mu.Unlock()
}

// newIter opens a pebble iterator over [lower, upper). Bounds keep pebble
// from ever surfacing a key outside the range the operation is allowed to
// read.
func (db *DB) newIter(ctx context.Context, lower, upper []byte) (*cursor, error) {
	c := new(cursor)
	if err := db.openCursor(ctx, db.pdb, c, new(pebble.IterOptions), lower, upper, false); err != nil {
		return nil, err
	}
	return c, nil
}

// openCursor opens an iterator of r (the DB's current state, or a
// snapshot) over [lower, upper) (nil: unbounded on that side) into c,
// keeping c's buffers. o is scratch space for the iterator options (pebble
// copies them).
//
// probes says that the cursor will make many prefix seeks for columns that
// mostly do not exist (the checks of a prewrite look for locks and writes
// of cells a transaction is about to create): pebble then consults the
// bloom filters of the last level too, which it skips by default because a
// read usually finds its key there. Without them, every such seek read a
// data block of the last-level file whose range held the key.
func (db *DB) openCursor(ctx context.Context, r pebble.Reader, c *cursor, o *pebble.IterOptions, lower, upper []byte, probes bool) error {
	*o = pebble.IterOptions{LowerBound: lower, UpperBound: upper, UseL6Filters: probes}
	if v := db.hooks.visit; v != nil {
		o.SkipPoint = func(k []byte) bool { v(k); return false }
	}
	it, err := r.NewIterWithContext(ctx, o)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	*c = cursor{it: it, visit: db.hooks.visit, onSeek: db.hooks.seek, lo: c.lo[:0]}
	return nil
}

// Tables lists the tables with at least one cell in group ("" means
// DefaultGroup). It visits one key per table, seeking from each table to the
// successor of its prefix.
func (db *DB) Tables(ctx context.Context, group string) ([]string, error) {
	gid, ok := db.layout.GroupID(group)
	if !ok {
		return nil, invalid("Tables", "group", "unknown group %q", group)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	c, err := db.newIter(ctx, []byte{byte(gid)}, keys.PrefixSuccessor([]byte{byte(gid)}))
	if err != nil {
		return nil, err
	}
	defer c.close()
	var tables []string
	for ok := c.seekGE([]byte{byte(gid)}); ok; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k := c.key()
		end, err := keys.ParseTable(k)
		if err != nil {
			return nil, fmt.Errorf("store: Tables: corrupt key %x: %w", k, err)
		}
		tables = append(tables, keys.UnescapeString(k[1:end]))
		ok = c.seekGE(keys.PrefixSuccessor(k[:end]))
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return tables, nil
}

// pebbleLogger routes pebble's log lines to slog. Pebble's informational
// lines (WAL recovery counts and the like) go to Debug so that opening a store
// is quiet; its errors go to Error.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}

// Fatalf is called by pebble on unrecoverable invariant violations (e.g.
// detected corruption); it must not return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "fatal", true)
	panic("pebble: " + msg)
}
