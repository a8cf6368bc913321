package engine

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ObservedSet tells an engine which columns carry notifications: a write
// of a strongly observed column leaves one, and only weakly observed
// columns accept NotifyWeak. A runner's registry is one.
type ObservedSet interface {
	ObservedKind(table string, col Column) (Kind, bool)
}

// GuardSet tells commits which cells are guarded: cells that every
// transaction writing them writes together with another cell, their guard.
//
// Snapshot isolation lets two concurrent transactions commit only if they
// write no cell in common; two writers of a guarded cell both write its
// guard, so the guard's conflict check already refuses one of them, and a
// one-phase commit over a store skips the guarded cell's own check (a
// seek into the store per cell). A search index's postings are the case
// in point: a document's postings spread over one row per term, and
// whoever writes them also writes the document's state.
//
// Commits enforce the rule (GuardCheck): a transaction that writes a
// guarded cell without its guard fails with ErrUnguarded, having written
// nothing. A writer that does not know a guard could not write it, and
// the one-phase commits of those that do would no longer see its write as
// a conflict: so the runners publish their guarded families in the store
// (internal/published), and an engine refuses to write a cell of a
// published guarded family whose guard it does not know
// (Config.DeclaredGuards).
type GuardSet interface {
	// GuardOf returns the guard of the cell (table, row, col), and false
	// if the cell is not guarded.
	GuardOf(table string, row []byte, col Column) (gTable string, gRow []byte, gCol Column, ok bool)
}

// GuardedFamilies tells which families a deployment declared guarded.
//
// A writer refuses to write a cell of one whose guard it does not know:
// the runners publish them (internal/published).
type GuardedFamilies interface {
	Guarded(table, family string) bool
}

// Liveness tells whether the process that holds a lock is alive.
type Liveness interface {
	// Alive reports whether holder is alive. An error is treated as
	// "alive" (the lock's TTL still bounds the wait).
	Alive(ctx context.Context, holder string) (bool, error)
}

// Config is what the front opens an engine with, whichever it is. Each
// engine documents what it makes of each field; zero values mean the
// engine's defaults.
type Config struct {
	WorkerID       string
	Observed       ObservedSet
	Guards         GuardSet
	DeclaredGuards GuardedFamilies
	// Liveness and LockTTL apply to an engine that resolves its own locks;
	// one whose store resolves them (TiKV's lock TTLs and heartbeats)
	// ignores them.
	Liveness Liveness
	LockTTL  time.Duration
	Lease    Lease
	// History is how much history below now the deployment keeps for
	// as-of reads (its collections' lag). An engine on a store shared
	// with other users (TiKV) holds it against their collections too.
	History time.Duration
	// Notified is called after a commit that left notifications, with
	// the rows it notified (see NotifiedRow).
	Notified                         func(rows []NotifiedRow)
	MaxAttempts                      int
	RetryBackoffMin, RetryBackoffMax time.Duration
	Logger                           *slog.Logger
	TracerProvider                   trace.TracerProvider
	MeterProvider                    metric.MeterProvider
}
