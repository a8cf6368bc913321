package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/trickle-dev/trickle/internal/retry"
)

// ConnectOptions configure Connect, for workers joining an external NATS
// cluster (or an Embedded server in another process). The zero value
// connects to nats://127.0.0.1:4222 without authentication: EnsureDefaults
// fills in every field left unset. Deployments set them through the
// TRICKLE_NATS_* variables (see ConnectOptionsFromEnv).
//
// At most one way of authenticating may be set: CredsFile, NKeySeedFile,
// User (with Password) or Token. A client of an Embedded server sets
// NKeySeedFile to the SeedFile of LocalCredentials.
//
// File paths are used as given (no "~" or variable expansion). Validate
// reads and parses every file named, and the connection reads them again on
// each attempt, so that rotated credentials and certificates are picked up
// on reconnect.
type ConnectOptions struct {
	// URLs is a comma-separated list of server URLs ("nats://host:4222,
	// tls://other:4222"); a URL without a scheme is taken as nats://. The
	// client learns the rest of the cluster from the first server it reaches.
	// Default: "nats://127.0.0.1:4222".
	URLs string
	// CredsFile is a NATS credentials file (user JWT and NKey seed), as used
	// with decentralized (operator mode) authentication. Default: none.
	CredsFile string
	// NKeySeedFile is a file holding a user NKey seed ("SU...", bare or
	// between "-----BEGIN ... -----" lines): the client proves it holds the
	// seed without sending it. Default: none.
	NKeySeedFile string
	// User and Password authenticate with a username and password. Default:
	// none.
	User, Password string
	// Token authenticates with a bearer token. Default: none.
	Token string
	// TLSCAFile is a PEM file of CA certificates to verify the servers with,
	// instead of the system roots. Setting any TLS field turns TLS on, and a
	// client with TLS on never falls back to plain text. Default: none
	// (system roots, if TLS is on, which a server requiring TLS turns on).
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are the PEM client certificate and its key,
	// for servers that verify clients; set both or neither. Default: none.
	TLSCertFile, TLSKeyFile string
	// TLSInsecureSkipVerify turns off verification of the servers'
	// certificates. Only for tests: it allows any man in the middle.
	// Default: false.
	TLSInsecureSkipVerify bool
	// Name identifies the connection in the servers' monitoring. Default:
	// "trickle".
	Name string
	// ConnectTimeout bounds each attempt to reach one server. Default: 5s.
	ConnectTimeout time.Duration
	// ReconnectWaitMin and ReconnectWaitMax bound the exponential backoff
	// (with jitter) between passes over the server list, both for the first
	// connection and for reconnecting, which goes on forever. Defaults: 100ms
	// and 5s.
	ReconnectWaitMin, ReconnectWaitMax time.Duration
	// Logger receives connection events: disconnects and reconnects at Warn
	// and Info, failed attempts at Debug. Default: slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *ConnectOptions) EnsureDefaults() *ConnectOptions {
	if strings.TrimSpace(o.URLs) == "" {
		o.URLs = nats.DefaultURL
	}
	if o.Name == "" {
		o.Name = "trickle"
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.ReconnectWaitMin == 0 {
		o.ReconnectWaitMin = 100 * time.Millisecond
	}
	if o.ReconnectWaitMax == 0 {
		o.ReconnectWaitMax = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports the first unusable field: malformed URLs, more than one
// way of authenticating, half-configured TLS, and credential or TLS files
// that cannot be read or do not hold what they should (a credentials file
// with a user JWT and its seed, a user NKey seed, PEM certificates, a key
// matching the client certificate). Files are opened and parsed here, so a
// mistyped path is an error before any connection attempt instead of a
// connection without TLS or without credentials.
func (o *ConnectOptions) Validate() error {
	return o.validate(func(field string) string { return field })
}

// validate is Validate with the names used in errors supplied by name, so
// that options read from the environment are reported by variable name.
func (o *ConnectOptions) validate(name func(field string) string) error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidOptions, name(field), why) }
	badFile := func(field, path string, err error) error {
		return fmt.Errorf("%w: %s %q: %w", ErrInvalidOptions, name(field), path, err)
	}
	if _, err := o.urlList(); err != nil {
		return bad("URLs", err.Error())
	}
	var methods []string
	for _, m := range []struct {
		field string
		set   bool
	}{{"CredsFile", o.CredsFile != ""}, {"NKeySeedFile", o.NKeySeedFile != ""}, {"User", o.User != ""}, {"Token", o.Token != ""}} {
		if m.set {
			methods = append(methods, name(m.field))
		}
	}
	switch {
	case len(methods) > 1:
		return fmt.Errorf("%w: %s are set together, but they are alternative ways of authenticating: set at most one",
			ErrInvalidOptions, strings.Join(methods, " and "))
	case o.Password != "" && o.User == "":
		return bad("Password", "is set without "+name("User"))
	case o.TLSCertFile != "" && o.TLSKeyFile == "":
		return bad("TLSCertFile", "is set without "+name("TLSKeyFile"))
	case o.TLSKeyFile != "" && o.TLSCertFile == "":
		return bad("TLSKeyFile", "is set without "+name("TLSCertFile"))
	case o.Name == "":
		return bad("Name", "must be set (call EnsureDefaults)")
	case o.ConnectTimeout <= 0:
		return bad("ConnectTimeout", "must be positive")
	case o.ReconnectWaitMin <= 0 || o.ReconnectWaitMax < o.ReconnectWaitMin:
		return bad("ReconnectWaitMin/Max", "must be positive with Min <= Max")
	case o.Logger == nil:
		return bad("Logger", "must be set (call EnsureDefaults)")
	}
	if o.CredsFile != "" {
		c, err := loadCredsFile(o.CredsFile)
		if err != nil {
			return badFile("CredsFile", o.CredsFile, err)
		}
		c.kp.Wipe()
	}
	if o.NKeySeedFile != "" {
		kp, err := loadSeedFile(o.NKeySeedFile)
		if err != nil {
			return badFile("NKeySeedFile", o.NKeySeedFile, err)
		}
		kp.Wipe()
	}
	if o.TLSCAFile != "" {
		if err := checkCAFile(o.TLSCAFile); err != nil {
			return badFile("TLSCAFile", o.TLSCAFile, err)
		}
	}
	if o.TLSCertFile != "" {
		if certFault, err := checkKeyPair(o.TLSCertFile, o.TLSKeyFile); err != nil {
			if certFault {
				return badFile("TLSCertFile", o.TLSCertFile, err)
			}
			return badFile("TLSKeyFile", o.TLSKeyFile, err)
		}
	}
	return nil
}

// urlList splits and checks URLs.
func (o *ConnectOptions) urlList() ([]string, error) {
	var out []string
	for _, raw := range strings.Split(o.URLs, ",") {
		s := strings.TrimSpace(raw)
		if s == "" {
			return nil, fmt.Errorf("%q has an empty entry", o.URLs)
		}
		withScheme := s
		if !strings.Contains(s, "://") {
			withScheme = "nats://" + s
		}
		u, err := url.Parse(withScheme)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", s, err)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return nil, fmt.Errorf("%q: scheme %q is not one of nats, tls, ws, wss", s, u.Scheme)
		}
		if u.Hostname() == "" {
			return nil, fmt.Errorf("%q has no host", s)
		}
		out = append(out, withScheme)
	}
	return out, nil
}

func (o *ConnectOptions) tlsOn() bool {
	return o.TLSCAFile != "" || o.TLSCertFile != "" || o.TLSInsecureSkipVerify
}

// natsOptions translates o into nats.go options. o must be valid.
func (o *ConnectOptions) natsOptions() ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.Timeout(o.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.CustomReconnectDelay(backoff(o.ReconnectWaitMin, o.ReconnectWaitMax)),
	}
	switch {
	case o.CredsFile != "":
		// Read on every attempt, so that a rotated file is used on reconnect.
		path := o.CredsFile
		opts = append(opts, nats.UserJWT(
			func() (string, error) {
				c, err := loadCredsFile(path)
				if err != nil {
					return "", fmt.Errorf("cluster: CredsFile %q: %w", path, err)
				}
				c.kp.Wipe()
				return c.jwt, nil
			},
			func(nonce []byte) ([]byte, error) {
				c, err := loadCredsFile(path)
				if err != nil {
					return nil, fmt.Errorf("cluster: CredsFile %q: %w", path, err)
				}
				defer c.kp.Wipe()
				return c.kp.Sign(nonce)
			}))
	case o.NKeySeedFile != "":
		path := o.NKeySeedFile
		pub, err := seedPublicKey(path)
		if err != nil {
			return nil, fmt.Errorf("cluster: NKeySeedFile %q: %w", path, err)
		}
		opts = append(opts, nats.Nkey(pub, func(nonce []byte) ([]byte, error) {
			kp, err := loadSeedFile(path)
			if err != nil {
				return nil, fmt.Errorf("cluster: NKeySeedFile %q: %w", path, err)
			}
			defer kp.Wipe()
			return kp.Sign(nonce)
		}))
	case o.User != "":
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	case o.Token != "":
		opts = append(opts, nats.Token(o.Token))
	}
	if o.tlsOn() {
		// Secure first, so that RootCAs and ClientCert fill in this config.
		opts = append(opts, nats.Secure(&tls.Config{
			MinVersion:         tls.VersionTLS12,
			InsecureSkipVerify: o.TLSInsecureSkipVerify, //nolint:gosec // opt-in, documented as test-only
		}))
		if o.TLSCAFile != "" {
			opts = append(opts, nats.RootCAs(o.TLSCAFile))
		}
		if o.TLSCertFile != "" {
			opts = append(opts, nats.ClientCert(o.TLSCertFile, o.TLSKeyFile))
		}
	}
	return opts, nil
}

// backoff returns nats.go's reconnect delay: exponential in the number of
// failed passes over the server list, capped and jittered, so that a
// restarted cluster is not hit by every worker at once.
func backoff(lo, hi time.Duration) nats.ReconnectDelayHandler {
	return func(attempts int) time.Duration { return retry.Backoff(attempts, lo, hi) }
}

// ErrAuthentication is wrapped by Connect's error when a server refused the
// client's credentials, or when the client and the server could not verify
// each other's TLS certificates (or one wants TLS and the other does not).
// Retrying cannot fix these, so Connect gives up at once rather than waiting
// for its context to end: a worker with the wrong credentials fails loudly
// instead of appearing to wait for the cluster.
var ErrAuthentication = errors.New("cluster: NATS authentication failed")

// authFailure reports whether retrying cannot fix err, and if so what went
// wrong in words for the error message: the server's authorization errors,
// certificate verification failures on either side, and a TLS mismatch
// between client and server.
func authFailure(err error) (what string, ok bool) {
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired):
		return "the server refused the credentials", true
	case errors.Is(err, nats.ErrSecureConnWanted):
		return "TLS is configured but the server does not offer it", true
	case errors.Is(err, nats.ErrNkeysNotSupported):
		return "an NKey is configured but the server does not authenticate clients", true
	}
	var (
		unknownCA   x509.UnknownAuthorityError
		badHost     x509.HostnameError
		invalidCert x509.CertificateInvalidError
		verify      *tls.CertificateVerificationError
		op          *net.OpError
	)
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &badHost), errors.As(err, &invalidCert), errors.As(err, &verify):
		return "the server's certificate is not trusted", true
	case errors.As(err, &op) && op.Op == "remote error":
		// A TLS alert from the server, such as "tls: certificate
		// required" or "tls: bad certificate".
		return "the server refused the TLS handshake (client certificate missing or not trusted?)", true
	case errors.Is(err, nats.ErrTLS) && strings.Contains(err.Error(), "after TLS handshake"):
		// With TLS 1.3 the client's handshake completes before the server
		// has checked the client's certificate; a server rejecting it may
		// just close the connection, which nats.go reports thus (it has no
		// sentinel error for it).
		return "the server closed the connection after the TLS handshake (client certificate missing or not trusted?)", true
	}
	return "", false
}

// Connect connects to a NATS cluster and returns once connected.
//
// It keeps trying (with backoff) until ctx ends, so that workers started
// before the cluster wait for it, but fails at once, with an error
// wrapping ErrAuthentication, when a server refuses the credentials or TLS
// cannot be established (see ErrAuthentication). Options are validated
// first, including the credential and TLS files, so that a configuration
// mistake is an ErrInvalidOptions error before any network traffic. Once
// connected, the connection reconnects forever after losing its server;
// close it with Close (or Drain) when done.
func Connect(ctx context.Context, o ConnectOptions) (*nats.Conn, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	urls, _ := o.urlList()
	opts, err := o.natsOptions()
	if err != nil {
		return nil, err
	}
	log := o.Logger.With("nats_urls", o.URLs)
	ev := newConnectEvents()
	nc, err := nats.Connect(strings.Join(urls, ","), append(opts, ev.handlers(log)...)...)
	if err != nil {
		return nil, fmt.Errorf("cluster: connect to %s: %w", o.URLs, err)
	}
	if err := ev.await(ctx, nc, o.URLs); err != nil {
		return nil, err
	}
	log.Debug("nats connected", "server", nc.ConnectedUrlRedacted())
	return nc, nil
}

// connectEvents carries what nats.go's handlers report while Connect
// waits for the first connection.
type connectEvents struct {
	connected  chan struct{}
	closed     chan struct{}
	attemptErr chan error // latest failed attempt before connecting
}

func newConnectEvents() *connectEvents {
	return &connectEvents{connected: make(chan struct{}, 1), closed: make(chan struct{}, 1), attemptErr: make(chan error, 1)}
}

// handlers are the connection's handlers: they log what happens to the
// connection for its whole life, and signal Connect's wait.
func (e *connectEvents) handlers(log *slog.Logger) []nats.Option {
	notify := func(c chan struct{}) {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	return []nats.Option{
		nats.ConnectHandler(func(*nats.Conn) { notify(e.connected) }),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
			notify(e.connected)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Debug("nats connection attempt failed", "err", err)
			select {
			case <-e.attemptErr:
			default:
			}
			select {
			case e.attemptErr <- err:
			default:
			}
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected; reconnecting", "err", err)
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			log.Debug("nats connection closed")
			notify(e.closed)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("nats async error", "subject", subj, "err", err)
		}),
	}
}

// await waits until nc is connected, and fails (closing nc) when ctx ends,
// at once on an authentication failure, or when nats.go gave up.
//
// Before the first connection, nats.go reports only the first failed
// attempt through ReconnectErrHandler; later attempts that reach a server
// but fail in the handshake (TLS, credentials) only set LastError, so it
// is polled too. After the same authorization error twice, nats.go closes
// the connection.
func (e *connectEvents) await(ctx context.Context, nc *nats.Conn, urls string) error {
	var last error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !nc.IsConnected() {
		select {
		case <-e.connected:
		case <-e.closed:
		case <-tick.C:
		case err := <-e.attemptErr:
			last = err
		case <-ctx.Done():
			nc.Close()
			if last == nil {
				last = nc.LastError()
			}
			if last != nil {
				return fmt.Errorf("cluster: connect to %s: %w (last attempt: %v)", urls, ctx.Err(), last)
			}
			return fmt.Errorf("cluster: connect to %s: %w", urls, ctx.Err())
		}
		if err := nc.LastError(); err != nil {
			last = err
		}
		if nc.IsConnected() {
			break
		}
		if last != nil {
			if what, ok := authFailure(last); ok {
				nc.Close()
				return fmt.Errorf("%w: connecting to %s: %s: %w", ErrAuthentication, urls, what, last)
			}
		}
		if nc.IsClosed() {
			if last == nil {
				last = errors.New("closed by the client library without an error")
			}
			return fmt.Errorf("cluster: connect to %s: %w", urls, last)
		}
	}
	return nil
}
