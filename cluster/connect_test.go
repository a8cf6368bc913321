package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	ca := newTestCA(t, dir, "ca")
	cert, key := ca.issueFiles(t, dir, "client")
	_, otherKey := ca.issueFiles(t, dir, "other")
	creds := newTestOperator(t).credsFile(t, dir, "user")
	seed, _ := newUserSeed(t)
	nkey := writeFile(t, dir, "user.nk", seed)
	garbage := writeFile(t, dir, "garbage", []byte("x"))
	empty := writeFile(t, dir, "empty", nil)
	brokenCert := writeFile(t, dir, "broken.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	missing := filepath.Join(dir, "missing.creds")

	// Validation must not reach the network: point every case at a
	// listener and check that nothing connected.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	url := "nats://" + ln.Addr().String()

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
		{"missing creds", ConnectOptions{CredsFile: missing}, []string{"CredsFile", missing, "no such file"}},
		{"missing nkey", ConnectOptions{NKeySeedFile: missing}, []string{"NKeySeedFile", missing, "no such file"}},
		{"missing CA", ConnectOptions{TLSCAFile: missing}, []string{"TLSCAFile", missing, "no such file"}},
		{"missing cert", ConnectOptions{TLSCertFile: missing, TLSKeyFile: key}, []string{"TLSCertFile", missing, "no such file"}},
		{"missing key", ConnectOptions{TLSCertFile: cert, TLSKeyFile: missing}, []string{"TLSKeyFile", missing, "no such file"}},
		{"dir as cert", ConnectOptions{TLSCertFile: dir, TLSKeyFile: key}, []string{"TLSCertFile", dir, "is a directory"}},
		{"dir as CA", ConnectOptions{TLSCAFile: dir}, []string{"TLSCAFile", dir, "is a directory"}},
		{"garbage creds", ConnectOptions{CredsFile: garbage}, []string{"CredsFile", garbage, "not a NATS credentials file"}},
		{"nkey seed as creds", ConnectOptions{CredsFile: nkey}, []string{"CredsFile", nkey, "not a NATS credentials file"}},
		{"garbage nkey", ConnectOptions{NKeySeedFile: garbage}, []string{"NKeySeedFile", garbage, "not a user NKey seed"}},
		{"garbage CA", ConnectOptions{TLSCAFile: garbage}, []string{"TLSCAFile", garbage, "no PEM certificate"}},
		{"empty CA", ConnectOptions{TLSCAFile: empty}, []string{"TLSCAFile", empty, "no PEM certificate"}},
		{"key as CA", ConnectOptions{TLSCAFile: key}, []string{"TLSCAFile", key, "no PEM certificate"}},
		{"broken CA", ConnectOptions{TLSCAFile: brokenCert}, []string{"TLSCAFile", brokenCert, "certificate 1"}},
		{"garbage cert", ConnectOptions{TLSCertFile: garbage, TLSKeyFile: key}, []string{"TLSCertFile", garbage, "no PEM certificate"}},
		{"garbage key", ConnectOptions{TLSCertFile: cert, TLSKeyFile: garbage}, []string{"TLSKeyFile", garbage, "not a private key"}},
		{"key of another cert", ConnectOptions{TLSCertFile: cert, TLSKeyFile: otherKey}, []string{"TLSKeyFile", otherKey, "not a private key"}},
		{"cert without key", ConnectOptions{TLSCertFile: cert}, []string{"TLSCertFile", "without TLSKeyFile"}},
		{"key without cert", ConnectOptions{TLSKeyFile: key}, []string{"TLSKeyFile", "without TLSCertFile"}},
		{"creds and token", ConnectOptions{CredsFile: creds, Token: "t"}, []string{"CredsFile and Token", "alternative"}},
		{"user and token", ConnectOptions{User: "u", Password: "p", Token: "t"}, []string{"User and Token", "alternative"}},
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
		o = tc.o
		if o.URLs == "" {
			o.URLs = url
		}
		if _, err := Connect(context.Background(), o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Connect err = %v", tc.name, err)
		}
	}
	if err := noConnections(ln); err != nil {
		t.Fatal(err)
	}

	good := []ConnectOptions{
		{URLs: "nats://a:4222, tls://b:4443,c:4222"},
		{CredsFile: creds},
		{NKeySeedFile: nkey},
		{User: "u", Password: "p"},
		{Token: "t"},
		{TLSCAFile: ca.file, TLSCertFile: cert, TLSKeyFile: key},
	}
	for _, o := range good {
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// noConnections reports an error if a connection is waiting on ln.
func noConnections(ln net.Listener) error {
	if err := ln.(*net.TCPListener).SetDeadline(time.Now()); err != nil {
		return err
	}
	c, err := ln.Accept()
	if err == nil {
		c.Close()
		return errors.New("a connection was attempted")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	return nil
}

func TestConnectUnreadableFile(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	dir := t.TempDir()
	seed, _ := newUserSeed(t)
	p := writeFile(t, dir, "user.nk", seed)
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	o := ConnectOptions{NKeySeedFile: p}
	o.EnsureDefaults()
	err := o.Validate()
	if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "NKeySeedFile") || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v", err)
	}
}

func TestConnectEmbedded(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	o := e.clientOptions()
	o.Name = "test-client"
	nc, err := Connect(testCtx(t), o)
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

// TestConnectWaitsForServerUntilContextEnds: with no server to talk to,
// Connect keeps trying until its context ends, then fails with the
// context's error, naming where it tried.
func TestConnectWaitsForServerUntilContextEnds(t *testing.T) {
	t.Parallel()
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		// Something listens but is no NATS server: each attempt is
		// accepted and cut off, and the test counts them.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		attempts := make(chan struct{}, 64)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
				select {
				case attempts <- struct{}{}:
				default:
				}
			}
		}()
		t.Cleanup(func() { ln.Close() })
		url := "nats://" + ln.Addr().String()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			nc, err := Connect(ctx, ConnectOptions{URLs: url, ReconnectWaitMin: 20 * time.Millisecond, ReconnectWaitMax: 20 * time.Millisecond, Logger: quietLogger()})
			if err == nil {
				nc.Close()
			}
			done <- err
		}()
		for n := 1; n <= 3; n++ {
			select {
			case <-attempts:
			case err := <-done:
				t.Fatalf("Connect gave up, attempts seen: %d: %v", n-1, err)
			case <-time.After(hangGuard):
				t.Fatalf("attempt %d: none within %v", n, hangGuard)
			}
		}
		cancel()
		err = recv(t, done, "Connect returning once its context is canceled")
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), url) {
			t.Fatalf("err = %v, want context.Canceled naming %s", err, url)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		// A port with nothing listening: take a free one and release it.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "nats://" + ln.Addr().String()
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			nc, err := Connect(ctx, ConnectOptions{URLs: url, ReconnectWaitMin: 20 * time.Millisecond, Logger: quietLogger()})
			if err == nil {
				nc.Close()
			}
			done <- err
		}()
		err = recv(t, done, "Connect returning once its deadline passed")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), url) {
			t.Fatalf("err = %v, want context.DeadlineExceeded naming %s", err, url)
		}
	})
}

// lateServerPort returns a loopback port where a server is not running
// yet: connections are accepted and closed at once, and the first one
// closes firstAttempt. release stops listening, so that a server can start
// on the port.
func lateServerPort(t *testing.T) (port int, firstAttempt <-chan struct{}, release func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		once := false
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			if !once {
				once = true
				close(first)
			}
		}
	}()
	release = func() {
		ln.Close()
		<-done
	}
	t.Cleanup(release)
	return ln.Addr().(*net.TCPAddr).Port, first, release
}

func TestConnectLateServer(t *testing.T) {
	t.Parallel()
	// Connect started before the server is up gets through once it is; and
	// with the wrong credentials, it fails once the server refuses them
	// rather than retrying until its context ends.
	for _, wrong := range []bool{false, true} {
		t.Run(fmt.Sprintf("wrong credentials %v", wrong), func(t *testing.T) {
			t.Parallel()
			serverCreds, err := LocalCredentials(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			clientCreds := serverCreds
			if wrong {
				if clientCreds, err = LocalCredentials(t.TempDir()); err != nil {
					t.Fatal(err)
				}
			}
			port, firstAttempt, release := lateServerPort(t)
			done := make(chan error, 1)
			ctx := testCtx(t)
			go func() {
				nc, err := Connect(ctx, ConnectOptions{URLs: "127.0.0.1:" + strconv.Itoa(port), NKeySeedFile: clientCreds.SeedFile,
					ReconnectWaitMin: 20 * time.Millisecond, ReconnectWaitMax: 100 * time.Millisecond, Logger: quietLogger()})
				if err == nil {
					nc.Close()
				}
				done <- err
			}()
			<-firstAttempt
			release()
			e, err := StartEmbedded(EmbeddedOptions{Port: port, ClientNKey: serverCreds.PublicKey, Logger: quietLogger()})
			if err != nil {
				t.Skipf("port %d taken meanwhile: %v", port, err)
			}
			defer e.Shutdown()
			err = <-done
			switch {
			case !wrong && err != nil:
				t.Fatal(err)
			case wrong && (!errors.Is(err, ErrAuthentication) || errors.Is(err, context.DeadlineExceeded)):
				t.Fatalf("err = %v, want ErrAuthentication before the context ends", err)
			}
		})
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	lo, hi := 100*time.Millisecond, 2*time.Second
	f := backoff(lo, hi)
	for a := 0; a < 40; a++ {
		d := f(a)
		if d < lo/2 || d > hi {
			t.Fatalf("attempt %d: %s outside [%s, %s]", a, d, lo/2, hi)
		}
	}
	if d := f(30); d < hi/2 {
		t.Fatalf("no growth: %s", d)
	}
}

func TestConnectOptionsFromEnv(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	cert, key := ca.issueFiles(t, dir, "client")
	creds := newTestOperator(t).credsFile(t, dir, "user")
	seed, _ := newUserSeed(t)
	nkey := writeFile(t, dir, "user.nk", seed)

	for _, tc := range []struct {
		env  map[string]string
		want ConnectOptions
	}{
		{map[string]string{
			"TRICKLE_NATS_URL": "nats://a:4222,nats://b:4222", "TRICKLE_NATS_CREDS": creds,
			"TRICKLE_NATS_TLS_CA": ca.file, "TRICKLE_NATS_TLS_CERT": cert, "TRICKLE_NATS_TLS_KEY": " " + key + " ",
			"TRICKLE_NATS_TLS_INSECURE": "true", "TRICKLE_NATS_NAME": "scanner-1", "TRICKLE_NATS_CONNECT_TIMEOUT": "2s",
		}, ConnectOptions{
			URLs: "nats://a:4222,nats://b:4222", CredsFile: creds,
			TLSCAFile: ca.file, TLSCertFile: cert, TLSKeyFile: key, TLSInsecureSkipVerify: true,
			Name: "scanner-1", ConnectTimeout: 2 * time.Second,
		}},
		{map[string]string{"TRICKLE_NATS_USER": "alice", "TRICKLE_NATS_PASSWORD": " s3cret "}, ConnectOptions{User: "alice", Password: " s3cret "}},
		{map[string]string{"TRICKLE_NATS_TOKEN": "tok"}, ConnectOptions{Token: "tok"}},
		{map[string]string{"TRICKLE_NATS_NKEY": nkey}, ConnectOptions{NKeySeedFile: nkey}},
		{nil, ConnectOptions{}},
	} {
		setEnv(t, tc.env)
		// Variables of other prefixes are not read.
		t.Setenv("TRICKLE_URL", "nats://wrong:4222")
		t.Setenv("TRICKLE_TOKEN", "wrong")
		got, err := ConnectOptionsFromEnv()
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if got != tc.want {
			t.Fatalf("%v:\n got %+v\nwant %+v", tc.env, got, tc.want)
		}
	}
}

func TestConnectOptionsFromEnvErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nonexistent")
	garbage := writeFile(t, dir, "garbage.pem", []byte("not PEM"))
	ca := newTestCA(t, dir, "ca")
	cert, key := ca.issueFiles(t, dir, "client")
	for _, tc := range []struct {
		env  map[string]string
		want []string // substrings of the error
	}{
		{map[string]string{EnvTLSInsecure: "maybe"}, []string{EnvTLSInsecure, `"maybe"`, "not a boolean"}},
		{map[string]string{EnvConnectTimeout: "abc"}, []string{EnvConnectTimeout, `"abc"`, "duration"}},
		{map[string]string{EnvConnectTimeout: "-1s"}, []string{EnvConnectTimeout, `"-1s"`, "positive"}},
		{map[string]string{EnvURL: "http://h:4222"}, []string{EnvURL, "scheme"}},
		{map[string]string{EnvToken: "t", EnvUser: "u"}, []string{EnvUser, EnvToken, "alternative"}},
		{map[string]string{EnvTLSCA: missing}, []string{EnvTLSCA, missing, "no such file"}},
		{map[string]string{EnvTLSCA: dir}, []string{EnvTLSCA, dir, "is a directory"}},
		{map[string]string{EnvTLSCA: garbage}, []string{EnvTLSCA, garbage, "no PEM certificate"}},
		{map[string]string{EnvTLSCert: missing, EnvTLSKey: key}, []string{EnvTLSCert, missing, "no such file"}},
		{map[string]string{EnvTLSCert: garbage, EnvTLSKey: key}, []string{EnvTLSCert, garbage, "no PEM certificate"}},
		{map[string]string{EnvTLSCert: cert, EnvTLSKey: missing}, []string{EnvTLSKey, missing, "no such file"}},
		{map[string]string{EnvTLSCert: cert, EnvTLSKey: garbage}, []string{EnvTLSKey, garbage, "not a private key"}},
		{map[string]string{EnvCreds: missing}, []string{EnvCreds, missing, "no such file"}},
		{map[string]string{EnvCreds: dir}, []string{EnvCreds, dir, "is a directory"}},
		{map[string]string{EnvCreds: garbage}, []string{EnvCreds, garbage, "not a NATS credentials file"}},
		{map[string]string{EnvNKey: missing}, []string{EnvNKey, missing, "no such file"}},
		{map[string]string{EnvNKey: dir}, []string{EnvNKey, dir, "is a directory"}},
		{map[string]string{EnvNKey: garbage}, []string{EnvNKey, garbage, "not a user NKey seed"}},
	} {
		setEnv(t, tc.env)
		_, err := ConnectOptionsFromEnv()
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%v: err = %v, want ErrInvalidOptions", tc.env, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", tc.env, err, w)
			}
		}
	}
}
