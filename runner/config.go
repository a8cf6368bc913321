// Package runner assembles a worker process: it opens (or reaches over
// NATS) the store and the timestamp oracle, registers the process's
// liveness, and runs scanners and observers from an explicit registry. The
// runner binary in cmd/runner and custom runner binaries both use it.
//
// A runner either owns the data directory — it opens the pebble store and
// the oracle there and serves both over NATS — or, when another runner
// already owns it, joins as a client of that owner. The first runner on a
// machine therefore needs no configuration, and the next ones find it.
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
func (c *Config) mode() Mode {
	if c.Mode == ModeAuto && c.NATSURL != "" {
		return ModeClient
	}
	return c.Mode
}

// Config configures a runner. The zero value is usable: EnsureDefaults
// fills every unset field.
type Config struct {
	// Mode: default ModeAuto.
	Mode Mode
	// DataDir holds the store, the oracle's state and the embedded NATS
	// server's JetStream data. Default: "data".
	DataDir string
	// NATSURL is an external NATS cluster to use. Default: "" — an owner
	// starts an embedded server on loopback, closed to anyone without the
	// credentials it keeps in DataDir, and a client connects to it with
	// them (see NATSPort).
	NATSURL string
	// NATSPort is the embedded server's port. Default: 0, meaning
	// cluster.DefaultPort (4222) for an owner, and for a client the port
	// the owner of DataDir announced, else 4222; -1 makes an owner pick a
	// free port (tests).
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
	// Namespace prefixes every NATS subject and bucket, so that several
	// deployments can share a NATS cluster. Default: "trickle".
	Namespace string
	// WorkerID identifies this process in locks and liveness. Default:
	// hostname-pid-random.
	WorkerID string
	// Workers bounds the observer transactions in flight. Default: 16.
	Workers int
	// Scanners is the number of scanning goroutines. Default: 4.
	Scanners int
	// LivenessTTL is how long this worker's liveness token outlives its
	// last refresh. Default: 10s.
	LivenessTTL time.Duration
	// LockTTL is the transaction lock TTL. Default: 20s.
	LockTTL time.Duration
	// GCInterval is how often the owner garbage-collects old versions.
	// Default: 10m; negative disables collection.
	GCInterval time.Duration
	// GCLag keeps versions this much younger than "now" on the oracle's
	// clock, for transactions of processes that run no worker (a loader).
	// Default: 10m.
	GCLag time.Duration
	// CompactInterval is how often the owner compacts the notify locality
	// group, dropping the tombstones of processed notifications. Default:
	// 5m; negative disables it.
	CompactInterval time.Duration
	// Private, when this process ends up owning the data directory, keeps
	// it from serving the store: no embedded NATS server, no store or
	// oracle service, a nil Node.Conn. It is for short-lived writers such
	// as the loader, so that a runner started meanwhile fails to join
	// (nothing answers on NATS) instead of joining a process about to
	// exit. Runners (Start, Run) refuse it. Default: false.
	Private bool
	// HTTPAddr is where Run serves Runner.Mux (query API, UI, metrics).
	// Default: "127.0.0.1:8080"; "off" disables it; port 0 picks a free
	// port (see Runner.HTTPAddr). Start fails if the address is taken.
	HTTPAddr string
	// HTTPMaxConcurrent bounds the HTTP requests handled at once; more
	// wait for a slot for up to a second, then get 503 Service Unavailable.
	// It keeps a burst of heavy queries from taking the runner's memory.
	// Default: 64.
	HTTPMaxConcurrent int
	// Logger receives diagnostics. Default: slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the spans of transactions and observer runs.
	// Default: the global provider (a no-op unless telemetry.Setup or the
	// program installed one).
	TracerProvider trace.TracerProvider
	// MeterProvider receives the runner's metrics, and MetricsHandler is
	// mounted on Mux at /metrics. When both are unset, Start uses the global
	// provider and telemetry.MetricsHandler if telemetry.Setup ran, and
	// otherwise a Prometheus-backed provider of its own, so /metrics always
	// serves the runner's metrics. A MeterProvider set without a handler
	// mounts no /metrics.
	MeterProvider  metric.MeterProvider
	MetricsHandler http.Handler
}

// EnsureDefaults fills unset fields and returns c.
func (c *Config) EnsureDefaults() *Config {
	if c.Mode == "" {
		c.Mode = ModeAuto
	}
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	if c.Namespace == "" {
		c.Namespace = "trickle"
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), time.Now().UnixNano()&0xffff)
	}
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.Scanners == 0 {
		c.Scanners = 4
	}
	if c.LivenessTTL == 0 {
		c.LivenessTTL = 10 * time.Second
	}
	if c.LockTTL == 0 {
		c.LockTTL = 20 * time.Second
	}
	if c.GCInterval == 0 {
		c.GCInterval = 10 * time.Minute
	}
	if c.GCLag == 0 {
		c.GCLag = 10 * time.Minute
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
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	return c
}

// Validate reports the first unusable field.
func (c *Config) Validate() error {
	switch {
	case c.Mode != ModeAuto && c.Mode != ModeOwner && c.Mode != ModeClient:
		return fmt.Errorf("runner: mode %q: want auto, owner or client", c.Mode)
	case c.Workers < 1 || c.Scanners < 1:
		return errors.New("runner: workers and scanners must be at least 1")
	case c.LivenessTTL < 100*time.Millisecond || c.LockTTL < 100*time.Millisecond:
		return errors.New("runner: liveness and lock TTLs must be at least 100ms")
	case c.NATSPort < -1 || c.NATSPort > 65535:
		return fmt.Errorf("runner: NATS port %d out of range", c.NATSPort)
	case c.ConnectTimeout < 0:
		return errors.New("runner: connect timeout must not be negative")
	case c.HTTPMaxConcurrent < 1:
		return errors.New("runner: HTTP concurrency must be at least 1")
	}
	return nil
}
