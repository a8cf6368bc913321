package cluster

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// These tests configure the client the way deployments do, through the
// TRICKLE_NATS_* variables, against real nats-servers requiring each kind of
// authentication. They cannot run in parallel: they set the environment.

// allEnvVars are the variables ConnectOptionsFromEnv reads.
var allEnvVars = []string{EnvURL, EnvCreds, EnvNKey, EnvUser, EnvPassword, EnvToken, EnvTLSCA, EnvTLSCert, EnvTLSKey, EnvTLSInsecure, EnvName, EnvConnectTimeout}

// setEnv clears every TRICKLE_NATS_ variable, so that the machine's own
// settings cannot leak in, then sets vars, until the (sub)test ends.
func setEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, v := range allEnvVars {
		t.Setenv(v, "")
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

// connectFromEnv connects as a trickle command does: options from the
// environment, then Connect. The context is long: a test reaching its end
// has hung where it should have failed.
func connectFromEnv(t *testing.T) (*nats.Conn, error) {
	t.Helper()
	o, err := ConnectOptionsFromEnv()
	if err != nil {
		return nil, err
	}
	o.Logger = quietLogger()
	nc, err := Connect(testCtx(t), o)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	return nc, nc.Flush()
}

type envCase struct {
	name string
	env  map[string]string // EnvURL is added unless set
	want error             // nil, ErrAuthentication or ErrInvalidOptions
	msg  []string          // substrings of the error
	// check, if set, inspects a successful connection.
	check func(t *testing.T, nc *nats.Conn)
}

func runEnvCases(t *testing.T, url string, cases []envCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{EnvURL: url}
			for k, v := range tc.env {
				env[k] = v
			}
			setEnv(t, env)
			nc, err := connectFromEnv(t)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				if tc.check != nil {
					tc.check(t, nc)
				}
				return
			}
			if err == nil {
				t.Fatalf("connected; want an error wrapping %v", tc.want)
			}
			t.Logf("error: %v", err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v; want one wrapping %v", err, tc.want)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v: gave up only when the context ended", err)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q lacks %q", err, m)
				}
			}
		})
	}
}

const authViolation = "Authorization Violation"

func TestEnvToken(t *testing.T) {
	url := runServer(t, &server.Options{Authorization: "tok-3f9a"})
	runEnvCases(t, url, []envCase{
		{name: "right", env: map[string]string{EnvToken: "tok-3f9a", EnvName: "token-client", EnvConnectTimeout: "3s"},
			check: func(t *testing.T, nc *nats.Conn) {
				if nc.Opts.Name != "token-client" || nc.Opts.Timeout != 3*time.Second {
					t.Errorf("%s and %s not applied: name %q, timeout %s", EnvName, EnvConnectTimeout, nc.Opts.Name, nc.Opts.Timeout)
				}
			}},
		{name: "wrong", env: map[string]string{EnvToken: "tok-0000"}, want: ErrAuthentication, msg: []string{authViolation, url}},
		{name: "missing", want: ErrAuthentication, msg: []string{authViolation}},
	})
}

func TestEnvUserPassword(t *testing.T) {
	url := runServer(t, &server.Options{Users: []*server.User{{Username: "alice", Password: " pass word "}}})
	runEnvCases(t, url, []envCase{
		{name: "right", env: map[string]string{EnvUser: "alice", EnvPassword: " pass word "}},
		{name: "password trimmed", env: map[string]string{EnvUser: "alice", EnvPassword: "pass word"}, want: ErrAuthentication, msg: []string{authViolation}},
		{name: "wrong password", env: map[string]string{EnvUser: "alice", EnvPassword: "guess"}, want: ErrAuthentication, msg: []string{authViolation}},
		{name: "wrong user", env: map[string]string{EnvUser: "bob", EnvPassword: " pass word "}, want: ErrAuthentication, msg: []string{authViolation}},
		{name: "missing", want: ErrAuthentication, msg: []string{authViolation}},
		{name: "password without user", env: map[string]string{EnvPassword: " pass word "}, want: ErrInvalidOptions, msg: []string{EnvPassword, EnvUser}},
	})
}

func TestEnvNKey(t *testing.T) {
	dir := t.TempDir()
	seed, pub := newUserSeed(t)
	right := writeFile(t, dir, "user.nk", seed)
	otherSeed, _ := newUserSeed(t)
	other := writeFile(t, dir, "other.nk", otherSeed)
	op := newTestOperator(t)
	accountSeed, err := op.accountKP.Seed()
	if err != nil {
		t.Fatal(err)
	}
	account := writeFile(t, dir, "account.nk", accountSeed)

	url := runServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	runEnvCases(t, url, []envCase{
		{name: "right", env: map[string]string{EnvNKey: right}},
		{name: "other user", env: map[string]string{EnvNKey: other}, want: ErrAuthentication, msg: []string{authViolation}},
		{name: "missing", want: ErrAuthentication, msg: []string{authViolation}},
		{name: "account seed", env: map[string]string{EnvNKey: account}, want: ErrInvalidOptions, msg: []string{EnvNKey, account, "not a user NKey seed"}},
	})
}

func TestEnvCreds(t *testing.T) {
	dir := t.TempDir()
	op := newTestOperator(t)
	right := op.credsFile(t, dir, "worker")
	// A user of an account the server's operator never signed.
	untrusted := newTestOperator(t).credsFile(t, dir, "stranger")
	// The JWT of one user with the seed of another.
	a, err := os.ReadFile(right)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(untrusted)
	if err != nil {
		t.Fatal(err)
	}
	jwtPart := string(a[:strings.Index(string(a), "-----BEGIN USER NKEY SEED-----")])
	seedPart := string(b[strings.Index(string(b), "-----BEGIN USER NKEY SEED-----"):])
	mismatched := writeFile(t, dir, "mismatched.creds", []byte(jwtPart+seedPart))
	seedOnly := writeFile(t, dir, "seed-only.creds", []byte(seedPart))

	url := runServer(t, op.serverOptions(t))
	runEnvCases(t, url, []envCase{
		{name: "right", env: map[string]string{EnvCreds: right}},
		{name: "untrusted account", env: map[string]string{EnvCreds: untrusted}, want: ErrAuthentication, msg: []string{authViolation}},
		{name: "missing", want: ErrAuthentication, msg: []string{authViolation}},
		{name: "seed of another user", env: map[string]string{EnvCreds: mismatched}, want: ErrInvalidOptions, msg: []string{EnvCreds, mismatched, "seed is for user"}},
		{name: "no JWT", env: map[string]string{EnvCreds: seedOnly}, want: ErrInvalidOptions, msg: []string{EnvCreds, seedOnly, "user JWT"}},
	})
}

func TestEnvTLSCA(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	otherCA := newTestCA(t, dir, "other-ca")
	url := runServer(t, &server.Options{TLSConfig: ca.serverTLS(t, nil)})
	verified := func(t *testing.T, nc *nats.Conn) {
		st, err := nc.TLSConnectionState()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.VerifiedChains) == 0 {
			t.Error("server certificate not verified")
		}
	}
	runEnvCases(t, url, []envCase{
		{name: "right CA", env: map[string]string{EnvTLSCA: ca.file}, check: verified},
		{name: "missing CA", want: ErrAuthentication, msg: []string{"unknown authority"}},
		{name: "other CA", env: map[string]string{EnvTLSCA: otherCA.file}, want: ErrAuthentication, msg: []string{"unknown authority"}},
		{name: "insecure", env: map[string]string{EnvTLSInsecure: "true"}, check: func(t *testing.T, nc *nats.Conn) {
			if _, err := nc.TLSConnectionState(); err != nil {
				t.Errorf("not TLS: %v", err)
			}
		}},
		{name: "insecure off", env: map[string]string{EnvTLSInsecure: "0"}, want: ErrAuthentication, msg: []string{"unknown authority"}},
	})

	// A client told to use TLS does not fall back to plain text.
	plain := runServer(t, &server.Options{})
	runEnvCases(t, plain, []envCase{
		{name: "server without TLS", env: map[string]string{EnvTLSCA: ca.file}, want: ErrAuthentication, msg: []string{"secure connection not available"}},
	})
}

func TestEnvMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	otherCA := newTestCA(t, dir, "other-ca")
	cert, key := ca.issueFiles(t, dir, "client")
	strangerCert, strangerKey := otherCA.issueFiles(t, dir, "stranger")
	url := runServer(t, &server.Options{TLSConfig: ca.serverTLS(t, ca)})
	runEnvCases(t, url, []envCase{
		{name: "right", env: map[string]string{EnvTLSCA: ca.file, EnvTLSCert: cert, EnvTLSKey: key}, check: func(t *testing.T, nc *nats.Conn) {
			st, err := nc.TLSConnectionState()
			if err != nil || len(st.VerifiedChains) == 0 {
				t.Errorf("TLS state %+v, %v", st, err)
			}
		}},
		{name: "no client certificate", env: map[string]string{EnvTLSCA: ca.file}, want: ErrAuthentication, msg: []string{"tls"}},
		{name: "certificate from another CA", env: map[string]string{EnvTLSCA: ca.file, EnvTLSCert: strangerCert, EnvTLSKey: strangerKey}, want: ErrAuthentication, msg: []string{"tls"}},
		{name: "key of another certificate", env: map[string]string{EnvTLSCA: ca.file, EnvTLSCert: cert, EnvTLSKey: strangerKey}, want: ErrInvalidOptions, msg: []string{EnvTLSKey, strangerKey}},
		{name: "certificate without key", env: map[string]string{EnvTLSCA: ca.file, EnvTLSCert: cert}, want: ErrInvalidOptions, msg: []string{EnvTLSCert, EnvTLSKey}},
		{name: "key without certificate", env: map[string]string{EnvTLSCA: ca.file, EnvTLSKey: key}, want: ErrInvalidOptions, msg: []string{EnvTLSKey, EnvTLSCert}},
	})
}
