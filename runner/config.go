// Package runner assembles a worker process: it opens (or reaches over
// NATS) the store and the timestamp oracle, registers the process's
// liveness, and runs scanners and observers from an explicit registry. The
// runner binary in cmd/runner and custom runner binaries both use it.
//
// A runner either owns the data directory — it opens the pebble store and
// the oracle there and serves both over NATS — or, when another process
// already owns it, joins as a client of that owner, and takes the directory
// over if the owner dies. The first runner on a machine therefore needs no
// configuration, and the next ones find it. Loaders and tools reach the
// deployment the same way (Open, with a Deployment), and get their DB from
// the Node (OpenDB), wired the one way every process of a deployment is.
package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/store"
)

// Mode says whether a process owns the store.
type Mode string

// Modes.
const (
	// ModeAuto owns the data directory if no other process does, else joins
	// its owner as a client; a runner that joined takes the directory over
	// when its owner dies. Naming a NATS URL (Config.NATSURL) makes a
	// process a client: it never falls back to a store of its own.
	ModeAuto Mode = "auto"
	// ModeOwner owns the data directory and fails if another process does.
	// With NATSURL, it serves the store on that NATS cluster.
	ModeOwner Mode = "owner"
	// ModeClient never opens the store; it reaches it over NATS.
	ModeClient Mode = "client"
)

// mode is the mode in effect: ModeAuto with a NATS URL is ModeClient.
func (d *Deployment) mode() Mode {
	if d.Mode == ModeAuto && d.NATSURL != "" {
		return ModeClient
	}
	return d.Mode
}

// Deployment says where a process finds the store and the oracle of a
// deployment and how it takes part in it: what every process needs, be it
// a runner, a loader or a tool (Open). The zero value is usable:
// EnsureDefaults fills every unset field.
type Deployment struct {
	// Mode: default ModeAuto.
	Mode Mode
	// History is how much history the process keeps for as-of reads
	// against collections it does not run: on a TiKV cluster, its GC
	// barrier stays this far below now (besides below its running
	// transactions), so that other deployments' collections keep it too.
	// A runner sets it to at least its GCLag. Default: 0.
	History time.Duration
	// DataDir holds the store, the oracle's state, the embedded NATS
	// server's data and credentials, and the store's id. Default: "data".
	DataDir string
	// Store names the store of the deployment: "" is the pebble store in
	// DataDir, owned by one process and served to the others over NATS;
	// "tikv://pd1:2379,pd2:2379" is a TiKV cluster reached through those
	// PD endpoints, which every process opens itself, with PD as the
	// oracle and no owner (see ParseStoreURL and TiKV). A process that
	// names a TiKV store never falls back to a local one. Default: "".
	Store string
	// TiKV holds TLS and test settings for a TiKV store. Default: none.
	TiKV TiKVOptions
	// NATSURL is an external NATS cluster to use; required with a TiKV
	// Store (ErrNATSRequired). Default: "" — an owner
	// starts an embedded server on loopback, closed to anyone without the
	// credentials it keeps in DataDir, and a client connects to it with
	// them (see NATSPort).
	NATSURL string
	// NATSPort is the embedded server's port. Default: 0, meaning
	// cluster.DefaultPort (4222) for an owner, and for a client the port
	// the owner of DataDir announced, else none: a client never dials a
	// default port, which may be another deployment's; -1 makes an owner
	// pick a free port (tests).
	NATSPort int
	// NATS holds credentials and TLS settings for an external cluster.
	// Default: none.
	NATS cluster.ConnectOptions
	// StoreID is the id of the store a client expects to reach; reaching
	// another one is an error (ErrWrongStore) naming both. Default: "", which
	// for a local deployment (no NATSURL) means the store of DataDir, and
	// with a NATSURL whatever store answers there.
	StoreID string
	// ConnectTimeout bounds how long Open tries to reach the deployment
	// (connect to NATS and find the store answering) before failing with
	// an error naming the URL it tried. Default: 10s.
	ConnectTimeout time.Duration
	// RequestTimeout bounds each request this process sends to the store
	// or the oracle over NATS, and each part of a large one
	// (remote.ClientOptions.RequestTimeout). Default: 10s.
	RequestTimeout time.Duration
	// MinTransferRate, in bytes per second, is the slowest a request or
	// answer too large for one NATS message may travel: it gets its size
	// at this rate on top of RequestTimeout
	// (remote.ClientOptions.MinTransferRate). Lower it for a slow link.
	// Default: 1 MiB/s.
	MinTransferRate int64
	// StoreCacheSize is the block cache ceiling, in bytes, of the store
	// this process opens when it owns DataDir (store.Options.CacheSize):
	// transactions re-read the cells they check and commit, so it should
	// hold the store's hot data. Clients and TiKV deployments open no
	// store and ignore it. Default: store.DefaultCacheSize (512 MiB).
	StoreCacheSize int64
	// Namespace prefixes every NATS subject and bucket, so that several
	// deployments can share a NATS cluster. Default: "trickle".
	Namespace string
	// WorkerID identifies this process in locks and liveness. Default:
	// hostname-pid-random.
	WorkerID string
	// LivenessTTL is how long this process's liveness token outlives its
	// last refresh. Default: 10s.
	LivenessTTL time.Duration
	// LockTTL is the transaction lock TTL. Default: 20s.
	LockTTL time.Duration
	// Private, when this process ends up owning the data directory, keeps
	// it from serving the store: no embedded NATS server, no store or
	// oracle service, no NATS connection. It is for short-lived writers such
	// as the loader, so that a runner started meanwhile fails to join
	// (nothing answers on NATS) instead of joining a process about to
	// exit. Runners (Start, Run) refuse it. With a TiKV store, which no
	// process owns, it has no effect. Default: false.
	Private bool
	// Logger receives diagnostics. Default: slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the spans of transactions and observer runs.
	// Default: the global provider (a no-op unless telemetry.Setup or the
	// program installed one).
	TracerProvider trace.TracerProvider
	// MeterProvider receives the process's metrics. Default: the global
	// provider (but see Config.MetricsHandler).
	MeterProvider metric.MeterProvider
}

// EnsureDefaults fills unset fields and returns d.
func (d *Deployment) EnsureDefaults() *Deployment {
	if d.Mode == "" {
		d.Mode = ModeAuto
	}
	if d.DataDir == "" {
		d.DataDir = "data"
	}
	if d.Namespace == "" {
		d.Namespace = "trickle"
	}
	if d.WorkerID == "" {
		host, _ := os.Hostname()
		d.WorkerID = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), time.Now().UnixNano()&0xffff)
	}
	if d.LivenessTTL == 0 {
		d.LivenessTTL = 10 * time.Second
	}
	if d.LockTTL == 0 {
		d.LockTTL = 20 * time.Second
	}
	if d.ConnectTimeout == 0 {
		d.ConnectTimeout = 10 * time.Second
	}
	if d.StoreCacheSize == 0 {
		d.StoreCacheSize = store.DefaultCacheSize
	}
	if d.RequestTimeout == 0 {
		d.RequestTimeout = remote.DefaultRequestTimeout
	}
	if d.MinTransferRate == 0 {
		d.MinTransferRate = remote.DefaultMinTransferRate
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.TracerProvider == nil {
		d.TracerProvider = otel.GetTracerProvider()
	}
	if d.MeterProvider == nil {
		d.MeterProvider = otel.GetMeterProvider()
	}
	return d
}

// Validate reports the first unusable field.
func (d *Deployment) Validate() error {
	switch {
	case d.Mode != ModeAuto && d.Mode != ModeOwner && d.Mode != ModeClient:
		return fmt.Errorf("runner: mode %q: want auto, owner or client", d.Mode)
	case d.LivenessTTL < 100*time.Millisecond || d.LockTTL < 100*time.Millisecond:
		return errors.New("runner: liveness and lock TTLs must be at least 100ms")
	case d.NATSPort < -1 || d.NATSPort > 65535:
		return fmt.Errorf("runner: NATS port %d out of range", d.NATSPort)
	case d.ConnectTimeout < 0:
		return errors.New("runner: connect timeout must not be negative")
	case d.StoreCacheSize < 0:
		return fmt.Errorf("runner: store cache size %d is negative", d.StoreCacheSize)
	}
	var oe *remote.OptionError
	if err := d.clientOptions().Validate(); errors.As(err, &oe) {
		switch oe.Field {
		case "ClientOptions.RequestTimeout":
			return fmt.Errorf("runner: request timeout %v: %s", d.RequestTimeout, oe.Reason)
		case "ClientOptions.MinTransferRate":
			return fmt.Errorf("runner: min transfer rate of %d bytes/s: %s", d.MinTransferRate, oe.Reason)
		}
		return fmt.Errorf("runner: %w", err)
	} else if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	if d.onTiKV() {
		return d.validateTiKV()
	}
	return nil
}

// Config configures a runner: its deployment, and how it runs observers
// and serves HTTP. The zero value is usable: EnsureDefaults fills every
// unset field.
type Config struct {
	Deployment
	// Workers bounds the observer transactions in flight. Default: 16,
	// and 64 on a TiKV store, where a transaction waits on round trips
	// more than it uses CPU, so that concurrency hides the latency.
	Workers int
	// Scanners is the number of scanning goroutines. Default: 4.
	Scanners int
	// GCInterval is how often the owner garbage-collects old versions. On
	// a TiKV store, where there is no owner, the runner that takes the
	// deployment's GC lease (a NATS key that expires after GCInterval)
	// collects, so that one collection runs per interval in the whole
	// deployment. Default: 10m; negative disables collection.
	GCInterval time.Duration
	// GCLag keeps versions this much younger than "now" on the oracle's
	// clock. Collections never pass a transaction that a process opened
	// through a Node runs (runners, loaders, OpenDB: they report their
	// oldest in their liveness token, and a round waits until each has
	// rewritten it), so the lag is only for programs that reach the store
	// by other means. Default: 1m; it must not be negative.
	GCLag time.Duration
	// GCSettledAfter makes the owner collect before GCInterval is up once
	// the store settles after much work: when the oracle has issued at
	// least this many timestamps since the last collection and fewer than
	// a hundredth of that many during the last GCLag. A load is then
	// followed by a collection about GCLag after it ends, which removes
	// what its indexing left behind (overwritten versions, consumed
	// notifications and deltas) and keeps reads of the index cheap.
	// Default: 20000 (about 1,600 pages loaded one by one into the web
	// index); negative disables it. Unused on a TiKV store.
	GCSettledAfter int
	// CompactInterval is how often the owner compacts the notify locality
	// group, dropping the tombstones of processed notifications (on a TiKV
	// store, TiKV compacts by itself and this is unused). Default: 5m;
	// negative disables it.
	CompactInterval time.Duration
	// HTTPAddr is where Run serves Runner.Mux (query API, UI, metrics).
	// Default: "127.0.0.1:8080"; "off" disables it; port 0 picks a free
	// port (see Runner.HTTPAddr). Start fails if the address is taken.
	HTTPAddr string
	// HTTPMaxConcurrent bounds the HTTP requests handled at once; more
	// wait for a slot for up to a second, then get 503 Service Unavailable.
	// It keeps a burst of heavy queries from taking the runner's memory.
	// Default: 64.
	HTTPMaxConcurrent int
	// MetricsHandler is mounted on Mux at /metrics. When it and
	// Deployment.MeterProvider are both unset, Start uses the global
	// provider and telemetry.MetricsHandler if telemetry.Setup ran, and
	// otherwise a Prometheus-backed provider of its own, so /metrics always
	// serves the runner's metrics. A MeterProvider set without a handler
	// mounts no /metrics.
	MetricsHandler http.Handler
}

// EnsureDefaults fills unset fields and returns c.
func (c *Config) EnsureDefaults() *Config {
	c.Deployment.EnsureDefaults()
	if c.Workers == 0 {
		c.Workers = 16
		if c.onTiKV() {
			c.Workers = 64
		}
	}
	if c.Scanners == 0 {
		c.Scanners = 4
	}
	if c.GCInterval == 0 {
		c.GCInterval = 10 * time.Minute
	}
	if c.GCLag == 0 {
		c.GCLag = time.Minute
	}
	if c.GCSettledAfter == 0 {
		c.GCSettledAfter = 20000
	}
	if c.CompactInterval == 0 {
		c.CompactInterval = 5 * time.Minute
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:8080"
	}
	if c.HTTPMaxConcurrent == 0 {
		c.HTTPMaxConcurrent = 64
	}
	return c
}

// Validate reports the first unusable field.
func (c *Config) Validate() error {
	if err := c.Deployment.Validate(); err != nil {
		return err
	}
	switch {
	case c.Workers < 1 || c.Scanners < 1:
		return errors.New("runner: workers and scanners must be at least 1")
	case c.HTTPMaxConcurrent < 1:
		return errors.New("runner: HTTP concurrency must be at least 1")
	case c.GCLag < 0:
		return fmt.Errorf("runner: GC lag %v is negative: a safe point past now would collect what running transactions read", c.GCLag)
	}
	return nil
}

// clientOptions are the options of this process's store and oracle
// clients.
func (d *Deployment) clientOptions() *remote.ClientOptions {
	return (&remote.ClientOptions{SubjectPrefix: d.Namespace, RequestTimeout: d.RequestTimeout, MinTransferRate: d.MinTransferRate}).EnsureDefaults()
}
