package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

func TestEmbeddedStartStop(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	if !strings.HasPrefix(e.ClientURL(), "nats://127.0.0.1:") || e.Port() <= 0 {
		t.Fatalf("ClientURL %q, Port %d", e.ClientURL(), e.Port())
	}
	nc, js := connectJS(t, e)
	ctx := testCtx(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s", []byte("x")); err != nil {
		t.Fatal(err)
	}
	gone := nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	e.Shutdown()
	e.Shutdown() // idempotent
	recv(t, gone, "the client seeing the server gone")
	if nc.IsConnected() {
		t.Fatalf("client still connected after Shutdown (status %v)", nc.Status())
	}
}

func TestEmbeddedRefusesNonLoopbackHost(t *testing.T) {
	t.Parallel()
	for _, host := range []string{"0.0.0.0", "192.168.1.10", "localhost", "::1", "127.0.0.2", "example.com"} {
		_, err := startServerWith(t, EmbeddedOptions{Host: host})
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), host) {
			t.Errorf("host %q: err = %v, want an invalid-options error naming the host and 127.0.0.1", host, err)
		}
	}
}

func TestEmbeddedOptionsValidate(t *testing.T) {
	t.Parallel()
	creds, err := LocalCredentials(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	acc, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	accountPub, err := acc.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	o := EmbeddedOptions{ClientNKey: creds.PublicKey}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Host != "127.0.0.1" || o.Port != DefaultPort || o.DataDir != "" || o.InsecureNoAuth {
		t.Fatalf("defaults: %+v", o)
	}
	insecure := EmbeddedOptions{InsecureNoAuth: true}
	insecure.EnsureDefaults()
	if err := insecure.Validate(); err != nil {
		t.Fatalf("InsecureNoAuth: %v", err)
	}
	for _, tc := range []struct {
		mod   func(*EmbeddedOptions)
		field string
	}{
		{func(o *EmbeddedOptions) { o.Port = 70000 }, "Port"},
		{func(o *EmbeddedOptions) { o.Port = -2 }, "Port"},
		{func(o *EmbeddedOptions) { o.MaxMemory = -5 }, "MaxMemory"},
		{func(o *EmbeddedOptions) { o.ReadyTimeout = -time.Second }, "ReadyTimeout"},
		{func(o *EmbeddedOptions) { o.ClientNKey = "" }, "ClientNKey is required"},
		{func(o *EmbeddedOptions) { o.InsecureNoAuth = true }, "InsecureNoAuth are both set"},
		{func(o *EmbeddedOptions) { o.ClientNKey = "UBOGUS" }, "not a public user NKey"},
		// An account key is a valid NKey, but not a user's.
		{func(o *EmbeddedOptions) { o.ClientNKey = accountPub }, "not a public user NKey"},
	} {
		o := EmbeddedOptions{ClientNKey: creds.PublicKey}
		o.EnsureDefaults()
		tc.mod(&o)
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v", tc.field, err)
		}
	}
}

func TestEmbeddedPortInUse(t *testing.T) {
	t.Parallel()
	a := startServer(t)
	_, err := startServerWith(t, EmbeddedOptions{Port: a.Port(), ReadyTimeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("second server on the same port started")
	}
	if !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("err = %v", err)
	}
}

func TestEmbeddedMemoryOnlyRefusesFileStreams(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}, Storage: jetstream.FileStorage}); err == nil {
		t.Fatal("memory-only server accepted a file-backed stream")
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "M", Subjects: []string{"m"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedDataDirPersists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := testCtx(t)
	start := func() (*testServer, jetstream.JetStream) {
		e, err := startServerWith(t, EmbeddedOptions{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		_, js := connectJS(t, e)
		return e, js
	}
	e, js := start()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "f", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	e.Shutdown()
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatalf("store not under DataDir: %v", err)
	}

	_, js = start()
	s, err := js.Stream(ctx, "F")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, "f")
	if err != nil || string(m.Data) != "kept" {
		t.Fatalf("after restart: %v, %v", m, err)
	}
}

func TestServerLoggerQuietByDefault(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	l := newServerLogger(slogTo(&buf))
	l.Noticef("Starting nats-server %s", "x")
	l.Debugf("debug")
	l.Tracef("trace")
	if buf.Len() != 0 {
		t.Fatalf("notices/debug logged at Info: %q", buf.String())
	}
	l.Warnf("careful %d", 1)
	l.Errorf("broken %d", 2)
	l.Fatalf("fatal %d", 3)
	out := buf.String()
	for _, want := range []string{"careful 1", "broken 2", "fatal 3", "component=nats-server"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %q", want, out)
		}
	}
	if l.lastError() != "fatal 3" {
		t.Errorf("lastError = %q", l.lastError())
	}
}

func TestEmbeddedRequiresCredentials(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	raw := func(opts ...nats.Option) error {
		nc, err := nats.Connect(s.ClientURL(), append(opts, nats.Timeout(5*time.Second), nats.NoReconnect())...)
		if err == nil {
			defer nc.Close()
			// A raw request to the store service's subject, as another
			// local user could send one.
			_, err = nc.Request("trickle.store.apply", []byte("x"), 5*time.Second)
			if errors.Is(err, nats.ErrNoResponders) {
				err = nil // connected and able to send
			}
		}
		return err
	}

	if err := raw(); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("without credentials: err = %v, want an authorization error", err)
	}
	other, err := LocalCredentials(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongKey, err := nats.NkeyOptionFromSeed(other.SeedFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]nats.Option{
		"another key": wrongKey,
		"a password":  nats.UserInfo("trickle", "guess"),
		"a token":     nats.Token(s.creds.PublicKey),
	} {
		if err := raw(opt); !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("with %s: err = %v, want an authorization error", name, err)
		}
	}
	rightKey, err := nats.NkeyOptionFromSeed(s.creds.SeedFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw(rightKey); err != nil {
		t.Fatalf("with the credentials: %v", err)
	}

	// Another process finds the same credentials in the shared directory.
	loaded, err := LocalCredentials(filepath.Dir(s.creds.SeedFile))
	if err != nil || loaded != s.creds {
		t.Fatalf("reloaded %+v, %v; want %+v", loaded, err, s.creds)
	}
	nc, err := Connect(testCtx(t), ConnectOptions{URLs: s.ClientURL(), NKeySeedFile: loaded.SeedFile, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	_, err = Connect(testCtx(t), ConnectOptions{URLs: s.ClientURL(), Logger: quietLogger()})
	if !errors.Is(err, ErrAuthentication) || !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("Connect without credentials: err = %v", err)
	}
}

func TestEmbeddedRefusesToStartWithoutCredentials(t *testing.T) {
	t.Parallel()
	_, err := StartEmbedded(EmbeddedOptions{Port: -1, Logger: quietLogger()})
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "ClientNKey") || !strings.Contains(err.Error(), "InsecureNoAuth") {
		t.Fatalf("err = %v", err)
	}
}

func TestEmbeddedInsecureNoAuth(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	e, err := StartEmbedded(EmbeddedOptions{Port: -1, InsecureNoAuth: true, Logger: slogTo(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	nc, err := nats.Connect(e.ClientURL(), nats.Timeout(5*time.Second), nats.NoReconnect())
	if err != nil {
		t.Fatalf("opted out of authentication, yet: %v", err)
	}
	nc.Close()
	// A client expecting to authenticate is told the server does not.
	creds, err := LocalCredentials(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Connect(testCtx(t), ConnectOptions{URLs: e.ClientURL(), NKeySeedFile: creds.SeedFile, Logger: quietLogger()})
	if !errors.Is(err, ErrAuthentication) || !strings.Contains(err.Error(), "does not authenticate") {
		t.Fatalf("NKey client of a server without authentication: err = %v", err)
	}
	e.Shutdown() // no more logging
	if !strings.Contains(logs.String(), "without authentication") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
}
