package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestEmbeddedStartStop(t *testing.T) {
	t.Parallel()
	e, err := StartEmbedded(EmbeddedOptions{Port: -1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
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
	e.Shutdown()
	e.Shutdown() // idempotent
	eventually(t, 5*time.Second, "client sees the server gone", func() bool { return !nc.IsConnected() })
}

func TestEmbeddedRefusesNonLoopbackHost(t *testing.T) {
	t.Parallel()
	for _, host := range []string{"0.0.0.0", "192.168.1.10", "localhost", "::1", "127.0.0.2", "example.com"} {
		_, err := StartEmbedded(EmbeddedOptions{Host: host, Port: -1, Logger: quietLogger()})
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), host) {
			t.Errorf("host %q: err = %v, want an invalid-options error naming the host and 127.0.0.1", host, err)
		}
	}
}

func TestEmbeddedOptionsValidate(t *testing.T) {
	t.Parallel()
	var o EmbeddedOptions
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Host != "127.0.0.1" || o.Port != DefaultPort || o.DataDir != "" {
		t.Fatalf("defaults: %+v", o)
	}
	for _, tc := range []struct {
		mod   func(*EmbeddedOptions)
		field string
	}{
		{func(o *EmbeddedOptions) { o.Port = 70000 }, "Port"},
		{func(o *EmbeddedOptions) { o.Port = -2 }, "Port"},
		{func(o *EmbeddedOptions) { o.MaxMemory = -5 }, "MaxMemory"},
		{func(o *EmbeddedOptions) { o.ReadyTimeout = -time.Second }, "ReadyTimeout"},
	} {
		o := EmbeddedOptions{}
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
	_, err := StartEmbedded(EmbeddedOptions{Port: a.Port(), ReadyTimeout: 500 * time.Millisecond, Logger: quietLogger()})
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
	start := func() (*Embedded, jetstream.JetStream) {
		e, err := StartEmbedded(EmbeddedOptions{Port: -1, DataDir: dir, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Shutdown)
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
