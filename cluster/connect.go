package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnectOptions configure Connect, for workers joining an external NATS
// cluster (or an Embedded server in another process). The zero value
// connects to nats://127.0.0.1:4222 without authentication: EnsureDefaults
// fills in every field left unset.
//
// At most one way of authenticating may be set: CredsFile, NKeySeedFile,
// User (with Password) or Token.
type ConnectOptions struct {
	// URLs is a comma-separated list of server URLs ("nats://host:4222,
	// tls://other:4222"); a URL without a scheme is taken as nats://. The
	// client learns the rest of the cluster from the first server it reaches.
	// Default: "nats://127.0.0.1:4222".
	URLs string
	// CredsFile is a NATS credentials file (user JWT and NKey seed), as used
	// with decentralized (operator mode) authentication. Default: none.
	CredsFile string
	// NKeySeedFile is a file holding a user NKey seed ("SU..."). Default:
	// none.
	NKeySeedFile string
	// User and Password authenticate with a username and password. Default:
	// none.
	User, Password string
	// Token authenticates with a bearer token. Default: none.
	Token string
	// TLSCAFile is a PEM file of CA certificates to verify the servers with,
	// instead of the system roots. Setting any TLS field turns TLS on.
	// Default: none (system roots, if TLS is on).
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

// Validate reports the first unusable field: malformed URLs, files that do
// not exist, half-configured TLS or more than one way of authenticating.
func (o *ConnectOptions) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, why) }
	if _, err := o.urlList(); err != nil {
		return bad("URLs", err.Error())
	}
	for _, f := range []struct{ field, path string }{
		{"CredsFile", o.CredsFile},
		{"NKeySeedFile", o.NKeySeedFile},
		{"TLSCAFile", o.TLSCAFile},
		{"TLSCertFile", o.TLSCertFile},
		{"TLSKeyFile", o.TLSKeyFile},
	} {
		if f.path == "" {
			continue
		}
		st, err := os.Stat(f.path)
		switch {
		case err != nil:
			return bad(f.field, fmt.Sprintf("%q: %v", f.path, errors.Unwrap(err)))
		case st.IsDir():
			return bad(f.field, fmt.Sprintf("%q is a directory, not a file", f.path))
		}
	}
	methods := 0
	for _, set := range []bool{o.CredsFile != "", o.NKeySeedFile != "", o.User != "", o.Token != ""} {
		if set {
			methods++
		}
	}
	switch {
	case methods > 1:
		return bad("CredsFile/NKeySeedFile/User/Token", "are alternatives: set at most one")
	case o.Password != "" && o.User == "":
		return bad("Password", "is set without User")
	case o.TLSCertFile != "" && o.TLSKeyFile == "":
		return bad("TLSCertFile", "is set without TLSKeyFile")
	case o.TLSKeyFile != "" && o.TLSCertFile == "":
		return bad("TLSKeyFile", "is set without TLSCertFile")
	case o.Name == "":
		return bad("Name", "must be set (call EnsureDefaults)")
	case o.ConnectTimeout <= 0:
		return bad("ConnectTimeout", "must be positive")
	case o.ReconnectWaitMin <= 0 || o.ReconnectWaitMax < o.ReconnectWaitMin:
		return bad("ReconnectWaitMin/Max", "must be positive with Min <= Max")
	case o.Logger == nil:
		return bad("Logger", "must be set (call EnsureDefaults)")
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
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	case o.NKeySeedFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: NKeySeedFile %q: %w", o.NKeySeedFile, err)
		}
		opts = append(opts, opt)
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
// failed passes over the server list, capped, with ±25% jitter so that a
// restarted cluster is not hit by every worker at once.
func backoff(lo, hi time.Duration) nats.ReconnectDelayHandler {
	return func(attempts int) time.Duration {
		d := lo
		for i := 1; i < attempts && d < hi; i++ {
			d *= 2
		}
		d = min(d, hi)
		return d - d/4 + rand.N(d/2+1)
	}
}

// isAuthError reports errors that retrying cannot fix.
func isAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// Connect connects to a NATS cluster and returns once connected. It keeps
// trying (with backoff) until ctx ends, so that workers started before the
// cluster wait for it, but fails at once on an authentication error. Once
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

	connected := make(chan struct{}, 1)
	attemptErr := make(chan error, 1) // latest failed attempt before connecting
	notify := func(c chan struct{}) {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	opts = append(opts,
		nats.ConnectHandler(func(*nats.Conn) { notify(connected) }),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
			notify(connected)
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Debug("nats connection attempt failed", "err", err)
			select {
			case <-attemptErr:
			default:
			}
			select {
			case attemptErr <- err:
			default:
			}
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected; reconnecting", "err", err)
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) { log.Debug("nats connection closed") }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("nats async error", "subject", subj, "err", err)
		}),
	)

	nc, err := nats.Connect(strings.Join(urls, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: connect to %s: %w", o.URLs, err)
	}
	var last error
	tick := time.NewTicker(100 * time.Millisecond) // in case a callback is missed
	defer tick.Stop()
	for !nc.IsConnected() {
		select {
		case <-connected:
		case <-tick.C:
		case err := <-attemptErr:
			last = err
			if isAuthError(err) {
				nc.Close()
				return nil, fmt.Errorf("cluster: connect to %s: %w", o.URLs, err)
			}
		case <-ctx.Done():
			nc.Close()
			if last == nil {
				last = nc.LastError()
			}
			if last != nil {
				return nil, fmt.Errorf("cluster: connect to %s: %w (last attempt: %v)", o.URLs, ctx.Err(), last)
			}
			return nil, fmt.Errorf("cluster: connect to %s: %w", o.URLs, ctx.Err())
		}
	}
	log.Debug("nats connected", "server", nc.ConnectedUrlRedacted())
	return nc, nil
}
