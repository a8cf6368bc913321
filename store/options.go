package store

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/keys"
	glayout "github.com/trickle-dev/trickle/store/internal/layout"
)

// Durability says when Apply waits for stable storage. It exists because the
// transaction layer wants synced commit points but cheap prewrites, while
// tests and throwaway stores want no fsync at all.
type Durability uint8

const (
	// DurabilitySynced (the default) makes every Apply whose RowTxn has
	// NoSync unset wait until its write is fsynced. Apply with NoSync set
	// returns once the write is in the store's single, ordered write-ahead
	// log but not yet synced; it becomes durable no later than the next
	// synced write of any row, because syncing the log syncs everything
	// before it. The transaction layer relies on exactly this: prewrites are
	// NoSync and the synced primary commit that follows them makes them
	// durable too. Concurrent synced writes share fsyncs (group commit).
	DurabilitySynced Durability = iota
	// DurabilityNone never waits for fsync, whatever RowTxn.NoSync says.
	// Writes are still ordered in the write-ahead log and survive a clean
	// Close, but a crash (of the process or the machine, depending on the
	// OS) may lose an arbitrary suffix of recent writes, including commit
	// points the caller was told about. Use it for tests, benchmarks and
	// stores that can be rebuilt.
	DurabilityNone
)

// String names the durability mode for logs.
func (d Durability) String() string {
	switch d {
	case DurabilitySynced:
		return "synced"
	case DurabilityNone:
		return "none"
	}
	return fmt.Sprintf("Durability(%d)", uint8(d))
}

// DefaultCacheSize is the block cache size used when Options.CacheSize is 0.
// It is a ceiling, not an allocation: blocks are cached as they are read.
// Transactions re-read the cells they check and commit, so a cache smaller
// than the store's hot data turns those reads into disk reads and
// decompression; on the web-index benchmark (4,000 pages, a 64 MiB
// memtable) a 64 MiB cache cost 9.6-11.5 ms of CPU per page against
// 5.8-6.9 with 256 MiB (docs/benchmarks-history.md, the store defaults).
const DefaultCacheSize = 512 << 20

// DefaultMemTableSize is the memtable size used when Options.MemTableSize
// is 0. Protocol records are short-lived (a lock lives from prewrite to
// commit, a notification until its observer ran), so the larger the
// memtable the more of them die before they are flushed, and the fewer
// flushes each compaction into the base level has to merge. Pebble starts
// with a small memtable and doubles it up to this size, so a small store
// never allocates it.
const DefaultMemTableSize = 64 << 20

// maxGroups is how many named groups fit in the one-byte group id space
// (0x00 is reserved for metadata).
const maxGroups = 0xFF - int(keys.DefaultGroup) + 1

// Options configures Open. The zero value (or nil) is valid: EnsureDefaults
// fills in every unset field, and each field documents its default.
type Options struct {
	// FS is the filesystem the store lives on. Tests use vfs.NewMem().
	// Default: vfs.Default (the OS filesystem).
	FS vfs.FS

	// Groups maps a column family to the name of the locality group that
	// stores it. Each group is a separate contiguous key range, so scanning a
	// group never reads another group's data. Families not listed are in
	// DefaultGroup. Group names other than DefaultGroup get ids in sorted
	// order at the first Open; later Opens keep ids already assigned and
	// give new groups fresh ids. (The transaction framework keeps its
	// notifications in a group of their own: see framework.StoreOptions.)
	//
	// The layout is persisted at the first Open. A later Open fails with
	// ErrGroupLayout if it would move a family that the persisted layout
	// names to another group (its data would become unreadable). Mapping a
	// new family to a non-default group is allowed, but the store cannot
	// cheaply tell whether that family already has cells in DefaultGroup; if
	// it does, those cells are hidden.
	// Default: none.
	Groups map[string]string

	// Durability says when Apply waits for fsync; see Durability.
	// Default: DurabilitySynced.
	Durability Durability

	// CacheSize is the size in bytes of the block cache.
	// Default: DefaultCacheSize (512 MiB).
	CacheSize int64

	// MemTableSize is the largest size in bytes of the memtable, the
	// in-memory buffer of recent writes (up to two exist while one is
	// flushed). Must be below 4 GiB.
	// Default: DefaultMemTableSize (64 MiB).
	MemTableSize int64

	// Logger receives the store's and pebble's log messages (pebble's
	// informational lines at Debug level).
	// Default: slog.Default().
	Logger *slog.Logger

	// SafePoint names the cell that holds the garbage-collection safe
	// point of whatever runs on the store: an 8-byte big-endian timestamp
	// written at version 0, only ever raised. The store keeps the highest
	// value written there in memory (read back when it opens) and refuses
	// every row transaction whose Snapshot is below it (see
	// RowTxn.Snapshot), so that a transaction a collection passed can
	// never commit, whatever its process believes. (The transaction
	// framework names its cell: see framework.StoreOptions.)
	// Default: none — no row transaction is refused.
	SafePoint *SafePointCell
}

// ErrGroupLayout is returned by Open when the options' Groups would move a
// family whose data is already stored in another locality group.
var ErrGroupLayout = glayout.ErrChanged

// EnsureDefaults fills in defaults for unset fields, so the rest of the store
// never has to ask. It copies Groups before adding to it, so a map shared
// between Options values is not mutated.
func (o *Options) EnsureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	// A copy, so that a map shared between Options values is never
	// mutated.
	o.Groups = maps.Clone(o.Groups)
	if o.Groups == nil {
		o.Groups = map[string]string{}
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports whether the options are usable. Call it after
// EnsureDefaults (Open does both); unset fields that have defaults are
// reported as errors.
func (o *Options) Validate() error {
	if o.FS == nil {
		return errors.New("store: Options.FS is nil")
	}
	if o.Logger == nil {
		return errors.New("store: Options.Logger is nil")
	}
	if o.CacheSize < 0 {
		return fmt.Errorf("store: Options.CacheSize is negative (%d)", o.CacheSize)
	}
	if sp := o.SafePoint; sp != nil && (sp.Table == "" || len(sp.Row) == 0 || sp.Column.Family == "") {
		return fmt.Errorf("store: Options.SafePoint names an incomplete cell %s/%q/%s", sp.Table, sp.Row, sp.Column)
	}
	if o.MemTableSize <= 0 || o.MemTableSize >= 4<<30 {
		return fmt.Errorf("store: Options.MemTableSize is %d, want 1 byte to 4 GiB", o.MemTableSize)
	}
	switch o.Durability {
	case DurabilitySynced, DurabilityNone:
	default:
		return fmt.Errorf("store: unknown Options.Durability %d", o.Durability)
	}
	names := map[string]bool{DefaultGroup: true}
	for fam, g := range o.Groups {
		if fam == "" {
			return errors.New("store: Options.Groups maps the empty family")
		}
		if g == "" {
			return fmt.Errorf("store: Options.Groups maps family %q to the empty group name", fam)
		}
		names[g] = true
	}
	if len(names) > maxGroups {
		return fmt.Errorf("store: Options.Groups names %d groups, at most %d fit", len(names), maxGroups)
	}
	return nil
}
