package loader

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/loader/input"
)

// Defaults of Options.
const (
	DefaultBatchSize     = 32
	DefaultBatchBytes    = 16 << 20
	DefaultConcurrency   = 4
	DefaultFlushInterval = time.Second
	DefaultStopGrace     = 10 * time.Second
	DefaultUnreachable   = 30 * time.Second
)

// Options configure a Loader. The zero value is usable: EnsureDefaults fills
// every unset field.
type Options struct {
	// BatchSize is the largest number of records written in one
	// transaction. Default: 32.
	BatchSize int
	// BatchBytes closes a batch early once the bodies it holds reach this
	// many bytes, bounding the memory and the transaction size of batches
	// of large pages. Default: 16 MiB.
	BatchBytes int64
	// Concurrency is the number of loader transactions in flight (and of
	// goroutines parsing pages). Default: 4.
	Concurrency int
	// FlushInterval is how long a batch that is not full may wait for more
	// records before it is written anyway (give or take as much again).
	// Default: 1s; negative: never (batches are written when full and at
	// the end of the input).
	FlushInterval time.Duration
	// StopGrace is how long the transactions already started may go on
	// after the context of Run ends, so that an interrupted load finishes
	// its commits instead of leaving locks behind for readers to wait out
	// (a lock of a cancelled commit lasts its TTL). No transaction starts
	// after the context ends. Default: 10s; negative: none (transactions
	// are cancelled at once).
	StopGrace time.Duration
	// Unreachable is how long writes may keep failing because the store
	// does not answer (errors matching store.ErrUnavailable: its runner
	// died, the network is down) before the run stops with ErrUnreachable.
	// Until then a batch that failed that way is retried, with backoff, so
	// that a runner restarting or another one taking over costs a pause,
	// not failed pages; every page write is idempotent, so a retry of a
	// commit whose outcome was lost is safe. Default: 30s; negative: no
	// retries (such batches fail at once).
	Unreachable time.Duration
	// MaxBody is the largest page body parsed, in bytes; larger pages are
	// bad records. Pass the same limit to the sources (InputOptions does)
	// so that they refuse oversized records without reading them whole.
	// Default: input.DefaultMaxBody (10 MiB).
	MaxBody int64
	// Stats, if set, is the input.Stats the sources update (pass the same
	// pointer in their input.Options). The loader reads it only from the
	// goroutine that ranges over the source, and copies its skip counts
	// into the progress counters and the Summary. Default: nil (skipped
	// records are not counted).
	Stats *input.Stats
	// OnProblem is called for every bad record, input error, failed page
	// and skipped symbolic link, with where it came from. Calls are serialized, so it need not
	// be safe for concurrent use, but it should be quick: loading waits for
	// it. Default: log each problem on Logger (Problem.Log).
	OnProblem func(Problem)
	// Bulk loads the whole input into an empty index in one import
	// (webindex.BulkLoadSorted), which is many times faster than page by
	// page: the records are read to the end first, sorted by URL on disk,
	// and the index computed within BulkMemory. The index must be empty (the run fails otherwise, changing
	// nothing); pages others load meanwhile are indexed after the import.
	// Default: false.
	Bulk bool
	// BulkMemory is about how much memory a bulk load may use: the
	// records read are sorted by URL, and the index computed, by external
	// sorts that spill to BulkTempDir past it, so a corpus of any size
	// loads within it (given the disk: about four times the input). A
	// process running a bulk load should also set its soft memory limit
	// (GOMEMLIMIT) to about this much, as cmd/loader does.
	// Default: DefaultBulkMemory(): 2 GiB, or a quarter of the memory this
	// process may use if that is less.
	BulkMemory int64
	// BulkTempDir is where a bulk load spills its sorted runs, in
	// directories of its own removed when it ends. Default: os.TempDir().
	BulkTempDir string
	// BulkResume, with Bulk, takes over a bulk load that stopped half way
	// (its process died) instead of failing because its fence is up.
	// Default: false.
	BulkResume bool
	// Logger receives diagnostics. Default: slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the span of each batch ("loader batch"), whose
	// transactions, and the observer runs they trigger, continue its
	// trace. Default: the global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider receives the loader's metrics. Default: the global
	// provider.
	MeterProvider metric.MeterProvider
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.StopGrace == 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.MaxBody == 0 {
		o.MaxBody = input.DefaultMaxBody
	}
	if o.Unreachable == 0 {
		o.Unreachable = DefaultUnreachable
	}
	if o.BulkMemory == 0 {
		o.BulkMemory = DefaultBulkMemory()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.OnProblem == nil {
		log := o.Logger
		o.OnProblem = func(p Problem) { p.Log(log) }
	}
	return o
}

// ErrInvalidOptions is wrapped by every error Validate returns.
var ErrInvalidOptions = errors.New("loader: invalid options")

// Validate reports the first unusable field.
func (o *Options) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, why) }
	switch {
	case o.BatchSize < 1:
		return bad("BatchSize", "must be at least 1")
	case o.BatchBytes < 1:
		return bad("BatchBytes", "must be positive")
	case o.Concurrency < 1:
		return bad("Concurrency", "must be at least 1")
	case o.MaxBody < 1:
		return bad("MaxBody", "must be positive")
	case o.BulkMemory < minBulkMemory:
		return bad("BulkMemory", fmt.Sprintf("must be at least %d bytes", minBulkMemory))
	case o.BulkResume && !o.Bulk:
		return bad("BulkResume", "needs Bulk")
	}
	return nil
}
