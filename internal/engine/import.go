package engine

import (
	"context"
	"errors"
)

// ErrImportNotEmpty is returned by Import when a table it is to write
// already holds cells other than its own: an import writes committed
// data without reading what is there, so it is only for tables nothing
// else has written. The framework re-exports it.
var ErrImportNotEmpty = errors.New("framework: import into a table that is not empty")

// ImportOptions say what an import writes, whichever engine runs it, so
// that the front hands both engines one request; the framework's
// ImportOptions documents each field, and each engine's Import what it
// makes of the timestamps.
type ImportOptions struct {
	// Tables are the tables the import writes, and the only ones.
	Tables []string
	// StartTs and CommitTs name the import: zero for a new one, the ones
	// an earlier attempt reported to resume or discard it.
	StartTs, CommitTs uint64
	// ChunkBytes is about how much the import buffers before it writes;
	// positive (the front fills its default).
	ChunkBytes int
	// Discard removes what the import at StartTs and CommitTs left and
	// writes nothing.
	Discard bool
}

// Importer receives the cells of an import: what the function given to
// Import writes through, so that the front wraps one type whichever
// engine writes. It is used by one goroutine.
type Importer interface {
	// StartTs and CommitTs name the import; a caller that may have to
	// resume or discard it records them before the first Set.
	StartTs() uint64
	CommitTs() uint64
	// Set writes value to the cell as committed data (row and value are
	// copied), buffered and written a chunk at a time, so it may return
	// an error of an earlier chunk's write.
	Set(table string, row []byte, col Column, value []byte) error
}

// Bulk is what every engine offers to load tables in bulk: a batch
// computation's output written as committed data, without the locks,
// notifications and per-transaction round trips of Transact. It is part
// of Engine: every deployment must be loadable, whichever engine runs it.
type Bulk interface {
	// Import writes the cells fn sets into opts.Tables, which must hold
	// nothing but what an earlier import at the same timestamps left
	// (ErrImportNotEmpty otherwise), with no lock and no notification,
	// or, with opts.Discard, removes what such an import left. See the
	// framework's DB.Import for the contract, and each engine's for what
	// its timestamps mean and what a reader sees while it writes.
	Import(ctx context.Context, opts ImportOptions, fn func(context.Context, Importer) error) error
}
