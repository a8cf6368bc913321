package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// DefaultPort is the port an embedded server listens on unless told
// otherwise: NATS's standard client port, so that external tools (the nats
// CLI, other trickle processes) find it without configuration.
const DefaultPort = 4222

// loopbackHost is the only address an embedded server may bind. The server
// is for the processes of one machine: it speaks plain (non-TLS) NATS and
// its clients' key lives in a local file, so it must not be reachable from
// other hosts.
const loopbackHost = "127.0.0.1"

// EmbeddedOptions configure StartEmbedded. EnsureDefaults fills in every
// field left unset except ClientNKey, which has no default: the server
// refuses to start without it unless InsecureNoAuth says otherwise.
type EmbeddedOptions struct {
	// ClientNKey is the public user NKey ("U...") every client must
	// authenticate as, by signing the server's nonce with its seed
	// (ConnectOptions.NKeySeedFile). Usually LocalCredentials(dir).PublicKey,
	// with dir the data directory the server's clients share. Required
	// unless InsecureNoAuth: without it any local user could read the data
	// passing through the server and change it with raw requests.
	ClientNKey string
	// InsecureNoAuth starts the server without authentication, so that every
	// process of every user on this machine may connect and read or change
	// everything passing through it. Only for tests and single-user
	// throwaway machines; it cannot be combined with ClientNKey. Default:
	// false.
	InsecureNoAuth bool
	// Host is the address to listen on. Only 127.0.0.1 is accepted: the
	// embedded server is for the processes of one machine (see
	// StartEmbedded). Default: "127.0.0.1".
	Host string
	// Port is the client port; -1 picks a free random port (for tests).
	// Default: DefaultPort (4222).
	Port int
	// DataDir, if set, holds JetStream's file store (in DataDir/jetstream),
	// so file-backed streams survive a restart. Default: "", meaning
	// memory-only: file-backed streams are refused and nothing is written to
	// disk beyond an empty private directory removed on Shutdown.
	DataDir string
	// ServerName names the server in logs and monitoring. Default:
	// "trickle-embedded".
	ServerName string
	// MaxMemory caps JetStream memory storage, in bytes. Default: 1 GiB.
	MaxMemory int64
	// ReadyTimeout bounds how long StartEmbedded waits for the server to
	// accept clients. Default: 10s.
	ReadyTimeout time.Duration
	// ServerDebug turns on the server's own debug messages (logged at
	// slog.LevelDebug). Default: false.
	ServerDebug bool
	// Logger receives the server's messages: notices at Debug (quiet under
	// a default handler), warnings at Warn, errors at Error. Default:
	// slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *EmbeddedOptions) EnsureDefaults() *EmbeddedOptions {
	if o.Host == "" {
		o.Host = loopbackHost
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.ServerName == "" {
		o.ServerName = "trickle-embedded"
	}
	if o.MaxMemory == 0 {
		o.MaxMemory = 1 << 30
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports the first unusable field.
func (o *EmbeddedOptions) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, why) }
	switch {
	case o.ClientNKey == "" && !o.InsecureNoAuth:
		return bad("ClientNKey", "is required: pass LocalCredentials(dir).PublicKey, or set InsecureNoAuth to let any local user connect")
	case o.ClientNKey != "" && o.InsecureNoAuth:
		return bad("ClientNKey", "and InsecureNoAuth are both set: choose one")
	case o.ClientNKey != "" && !nkeys.IsValidPublicUserKey(o.ClientNKey):
		return bad("ClientNKey", fmt.Sprintf("%q is not a public user NKey (\"U\" followed by 55 base32 characters)", o.ClientNKey))
	case o.Host != loopbackHost:
		return bad("Host", fmt.Sprintf("%q refused: the embedded server serves only this machine and binds only %s", o.Host, loopbackHost))
	case o.Port != -1 && (o.Port < 1 || o.Port > 65535):
		return bad("Port", "must be -1 (random) or within 1..65535")
	case o.MaxMemory < 1:
		return bad("MaxMemory", "must be positive")
	case o.ReadyTimeout <= 0:
		return bad("ReadyTimeout", "must be positive")
	case o.Logger == nil:
		return bad("Logger", "must be set (call EnsureDefaults)")
	}
	return nil
}

// Embedded is an in-process nats-server with JetStream, for running a trickle
// cluster on one machine (and for tests) without operating NATS separately.
type Embedded struct {
	srv    *server.Server
	tmpDir string // private store dir of a memory-only server, removed on Shutdown
	log    *slog.Logger

	shutdown sync.Once
}

// StartEmbedded starts a nats-server on loopback with JetStream enabled and
// returns once it accepts clients. Shut it down with Shutdown.
//
// Clients must authenticate as o.ClientNKey: other local users, who can
// reach any loopback port, cannot connect without the seed, which
// LocalCredentials keeps readable by its owner only. Connections are not
// encrypted, which is why the server listens on loopback only.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}

	e := &Embedded{log: o.Logger}
	sopts := &server.Options{
		ServerName:         o.ServerName,
		Host:               o.Host,
		Port:               o.Port,
		JetStream:          true,
		JetStreamMaxMemory: o.MaxMemory,
		NoSigs:             true, // the host process owns signal handling
		Debug:              o.ServerDebug,
	}
	if o.ClientNKey != "" {
		sopts.Nkeys = []*server.NkeyUser{{Nkey: o.ClientNKey}}
	}
	if o.DataDir != "" {
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("cluster: embedded server data dir: %w", err)
		}
		sopts.StoreDir = o.DataDir
	} else {
		// nats-server always wants a store directory; left empty it would
		// share one under os.TempDir() with every other server on the
		// machine. Give it a private one, removed on Shutdown and kept empty
		// by the account limit set below.
		dir, err := os.MkdirTemp("", "trickle-nats-")
		if err != nil {
			return nil, fmt.Errorf("cluster: embedded server temp dir: %w", err)
		}
		e.tmpDir = dir
		sopts.StoreDir = dir
	}

	srv, err := server.NewServer(sopts)
	if err != nil {
		e.removeTmp()
		return nil, fmt.Errorf("cluster: embedded server: %w", err)
	}
	sl := newServerLogger(o.Logger)
	srv.SetLoggerV2(sl, o.ServerDebug, false, false)
	e.srv = srv

	srv.Start()
	if !srv.ReadyForConnections(o.ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		e.removeTmp()
		msg := "not ready for connections after " + o.ReadyTimeout.String()
		if last := sl.lastError(); last != "" {
			msg += ": " + last
		}
		return nil, fmt.Errorf("cluster: embedded server on %s: %s", hostPort(o.Host, o.Port), msg)
	}
	if !srv.JetStreamEnabled() {
		e.Shutdown()
		return nil, errors.New("cluster: embedded server started without JetStream")
	}
	if o.DataDir == "" {
		// Memory-only: an account file-storage limit of zero makes the
		// server refuse file-backed streams instead of writing them to the
		// throwaway directory. (The server-wide limit cannot be zero: an
		// unset one means "all the disk".)
		err := srv.GlobalAccount().UpdateJetStreamLimits(map[string]server.JetStreamAccountLimits{
			"": {MaxMemory: -1, MaxStore: 0, MaxStreams: -1, MaxConsumers: -1, MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1},
		})
		if err != nil {
			e.Shutdown()
			return nil, fmt.Errorf("cluster: embedded server: limiting JetStream to memory: %w", err)
		}
	}
	if o.InsecureNoAuth {
		e.log.Warn("embedded nats-server accepts clients without authentication", "url", e.ClientURL())
	}
	e.log.Debug("embedded nats-server ready", "url", e.ClientURL(), "data_dir", o.DataDir, "client_nkey", o.ClientNKey)
	return e, nil
}

func hostPort(host string, port int) string {
	if port == -1 {
		return host + ":<random>"
	}
	return host + ":" + strconv.Itoa(port)
}

// ClientURL is the URL clients connect to, e.g. "nats://127.0.0.1:4222"
// (with the actual port when Port was -1).
func (e *Embedded) ClientURL() string {
	return e.srv.ClientURL()
}

// Port is the port the server listens on, resolved when Port was -1.
func (e *Embedded) Port() int {
	if a, ok := e.srv.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// Shutdown stops the server gracefully (closing client connections and
// flushing JetStream) and returns once it has stopped. It is idempotent.
func (e *Embedded) Shutdown() {
	e.shutdown.Do(func() {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
		e.removeTmp()
		e.log.Debug("embedded nats-server stopped")
	})
}

func (e *Embedded) removeTmp() {
	if e.tmpDir == "" {
		return
	}
	if err := os.RemoveAll(filepath.Clean(e.tmpDir)); err != nil {
		e.log.Warn("removing embedded server temp dir", "dir", e.tmpDir, "err", err)
	}
}
