package cluster

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestConnectOptionsValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "present")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.creds")

	var ok ConnectOptions
	ok.EnsureDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}

	for _, tc := range []struct {
		name string
		o    ConnectOptions
		want []string // substrings of the error
	}{
		{"missing creds", ConnectOptions{CredsFile: missing}, []string{"CredsFile", missing}},
		{"missing nkey", ConnectOptions{NKeySeedFile: missing}, []string{"NKeySeedFile", missing}},
		{"missing CA", ConnectOptions{TLSCAFile: missing}, []string{"TLSCAFile", missing}},
		{"dir as cert", ConnectOptions{TLSCertFile: dir, TLSKeyFile: file}, []string{"TLSCertFile", "directory"}},
		{"cert without key", ConnectOptions{TLSCertFile: file}, []string{"TLSCertFile", "without TLSKeyFile"}},
		{"key without cert", ConnectOptions{TLSKeyFile: file}, []string{"TLSKeyFile", "without TLSCertFile"}},
		{"creds and token", ConnectOptions{CredsFile: file, Token: "t"}, []string{"at most one"}},
		{"user and token", ConnectOptions{User: "u", Password: "p", Token: "t"}, []string{"at most one"}},
		{"password alone", ConnectOptions{Password: "p"}, []string{"Password", "without User"}},
		{"bad scheme", ConnectOptions{URLs: "http://h:4222"}, []string{"URLs", "scheme"}},
		{"empty entry", ConnectOptions{URLs: "nats://a:4222,,nats://b:4222"}, []string{"URLs", "empty"}},
		{"no host", ConnectOptions{URLs: "nats://:4222"}, []string{"URLs", "no host"}},
		{"timeout", ConnectOptions{ConnectTimeout: -time.Second}, []string{"ConnectTimeout"}},
		{"backoff", ConnectOptions{ReconnectWaitMin: time.Second, ReconnectWaitMax: time.Millisecond}, []string{"ReconnectWait"}},
	} {
		o := tc.o
		o.EnsureDefaults()
		err := o.Validate()
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: err = %v, want ErrInvalidOptions", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
		// Connect refuses the same options before touching the network.
		if _, err := Connect(context.Background(), tc.o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Connect err = %v", tc.name, err)
		}
	}

	good := []ConnectOptions{
		{URLs: "nats://a:4222, tls://b:4443,c:4222"},
		{CredsFile: file},
		{User: "u", Password: "p"},
		{Token: "t"},
		{TLSCAFile: file, TLSCertFile: file, TLSKeyFile: file},
	}
	for _, o := range good {
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestConnectEmbedded(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	nc, err := Connect(testCtx(t), ConnectOptions{URLs: e.ClientURL(), Name: "test-client", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.Opts.Name != "test-client" || nc.Opts.MaxReconnect != -1 {
		t.Fatalf("name %q, max reconnects %d", nc.Opts.Name, nc.Opts.MaxReconnect)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestConnectWaitsForServerUntilContextEnds(t *testing.T) {
	t.Parallel()
	// A port with nothing listening: take a free one and release it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Connect(ctx, ConnectOptions{URLs: "nats://" + addr, ReconnectWaitMin: 20 * time.Millisecond, Logger: quietLogger()})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("Connect outlived its context by far: %s", time.Since(start))
	}
}

func TestConnectLateServer(t *testing.T) {
	t.Parallel()
	// Connect started before the server is up gets through once it is.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	type result struct{ err error }
	done := make(chan result, 1)
	ctx := testCtx(t)
	go func() {
		nc, err := Connect(ctx, ConnectOptions{URLs: "127.0.0.1:" + strconv.Itoa(port), ReconnectWaitMin: 20 * time.Millisecond, ReconnectWaitMax: 100 * time.Millisecond, Logger: quietLogger()})
		if err == nil {
			nc.Close()
		}
		done <- result{err}
	}()
	time.Sleep(200 * time.Millisecond)
	e, err := StartEmbedded(EmbeddedOptions{Port: port, Logger: quietLogger()})
	if err != nil {
		t.Skipf("port %d taken meanwhile: %v", port, err)
	}
	defer e.Shutdown()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	lo, hi := 100*time.Millisecond, 2*time.Second
	f := backoff(lo, hi)
	for a := 0; a < 40; a++ {
		d := f(a)
		if d < lo*3/4 || d > hi*5/4 {
			t.Fatalf("attempt %d: %s outside [%s, %s]", a, d, lo*3/4, hi*5/4)
		}
	}
	if d := f(30); d < hi*3/4 {
		t.Fatalf("no growth: %s", d)
	}
}

func TestConnectOptionsFromEnv(t *testing.T) {
	t.Setenv("TRICKLE_NATS_URL", "nats://a:4222,nats://b:4222")
	t.Setenv("TRICKLE_NATS_CREDS", "/etc/trickle/user.creds")
	t.Setenv("TRICKLE_NATS_USER", "alice")
	t.Setenv("TRICKLE_NATS_PASSWORD", " s3cret ")
	t.Setenv("TRICKLE_NATS_TOKEN", "tok")
	t.Setenv("TRICKLE_NATS_NKEY", "/k.nk")
	t.Setenv("TRICKLE_NATS_TLS_CA", "/ca.pem")
	t.Setenv("TRICKLE_NATS_TLS_CERT", "/c.pem")
	t.Setenv("TRICKLE_NATS_TLS_KEY", "/k.pem")
	t.Setenv("TRICKLE_NATS_TLS_INSECURE", "true")
	t.Setenv("TRICKLE_NATS_NAME", "scanner-1")
	t.Setenv("TRICKLE_NATS_CONNECT_TIMEOUT", "2s")
	want := ConnectOptions{
		URLs: "nats://a:4222,nats://b:4222", CredsFile: "/etc/trickle/user.creds", NKeySeedFile: "/k.nk",
		User: "alice", Password: " s3cret ", Token: "tok",
		TLSCAFile: "/ca.pem", TLSCertFile: "/c.pem", TLSKeyFile: "/k.pem", TLSInsecureSkipVerify: true,
		Name: "scanner-1", ConnectTimeout: 2 * time.Second,
	}
	for _, prefix := range []string{"", "TRICKLE_NATS", "TRICKLE_NATS_"} {
		got, err := ConnectOptionsFromEnv(prefix)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("prefix %q:\n got %+v\nwant %+v", prefix, got, want)
		}
	}

	t.Setenv("OTHER_URL", "nats://other:4222")
	got, err := ConnectOptionsFromEnv("OTHER")
	if err != nil || got != (ConnectOptions{URLs: "nats://other:4222"}) {
		t.Fatalf("OTHER: %+v, %v", got, err)
	}

	t.Setenv("TRICKLE_NATS_TLS_INSECURE", "maybe")
	if _, err := ConnectOptionsFromEnv(""); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "TRICKLE_NATS_TLS_INSECURE") {
		t.Fatalf("bad bool: %v", err)
	}
	t.Setenv("TRICKLE_NATS_TLS_INSECURE", "")
	t.Setenv("TRICKLE_NATS_CONNECT_TIMEOUT", "soon")
	if _, err := ConnectOptionsFromEnv(""); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "TRICKLE_NATS_CONNECT_TIMEOUT") {
		t.Fatalf("bad duration: %v", err)
	}
}
