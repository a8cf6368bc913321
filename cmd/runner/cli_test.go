package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/runner"
)

// runCmd runs the runner command in this process.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = run(ctx, args, &out, &errb)
	t.Logf("runner %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

func TestHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{{"-help"}, {"-h"}, {"help"}, {"status", "-help"}} {
		code, out, _ := runCmd(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d, want 0", args, code)
		}
		for _, c := range commands {
			if !strings.Contains(out, "\n  "+c.name) {
				t.Errorf("%v: help does not list %q", args, c.name)
			}
		}
		if !strings.Contains(out, "-nats-port") || !strings.Contains(out, "TRICKLE_NATS_PORT") {
			t.Errorf("%v: help does not list the flags with their variables", args)
		}
	}
}

func TestBadCommandLines(t *testing.T) {
	t.Setenv("TRICKLE_NATS_PORT", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"status", "extra"}, `status takes no arguments`},
		{[]string{"scan", "a", "b"}, "scan takes at most one table"},
		{[]string{"backfill"}, "backfill takes one observer"},
		{[]string{"backfill", "a", "b"}, "backfill takes one observer"},
		{[]string{"-log-level", "loud", "status"}, `-log-level "loud"`},
		{[]string{"-store-cache-mb", "0", "status"}, "-store-cache-mb 0: want a positive number of MiB"},
		{[]string{"-gc-lag", "-1s", "-http", "off", "-data", t.TempDir()}, "GC lag -1s is negative"},
	} {
		code, _, errOut := runCmd(t, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errOut, tc.want)
		}
		if !strings.HasPrefix(errOut, "runner: ") || strings.Contains(errOut, "runner: runner:") {
			t.Errorf("%v: error %q does not carry exactly one prefix", tc.args, errOut)
		}
	}
}

func TestBadEnvironmentVariable(t *testing.T) {
	t.Setenv("TRICKLE_NATS_PORT", "abc")
	code, _, errOut := runCmd(t, "status")
	if code != 1 || !strings.Contains(errOut, `TRICKLE_NATS_PORT="abc"`) {
		t.Fatalf("exit %d, stderr %q; want an error naming TRICKLE_NATS_PORT", code, errOut)
	}
}

// Client commands fail, rather than hang, when no runner answers: within
// the connect timeout, naming the URL tried and what to do. Flags before
// the command apply to it: this is a client, not a runner started on the
// data directory.
func TestClientCommandsFailWhenNoRunnerAnswers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	for _, args := range [][]string{
		{"-nats-port", fmt.Sprint(port), "status", "-data", dir, "-connect-timeout", "1s"},
		{"wait", "-nats-port", fmt.Sprint(port), "-data", dir, "-timeout", "1s"},
		{"scan", "-nats-port", fmt.Sprint(port), "-data", dir, "-connect-timeout", "1s", "docs"},
	} {
		code, _, errOut := runCmd(t, args...)
		if code != 1 || !strings.Contains(errOut, "no store answers on "+url) || !strings.Contains(errOut, "start a runner") {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %s and what to do", args, code, errOut, url)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%v: a client command created the data directory (%v): it started a runner", args, err)
		}
	}
}

func TestBusyHTTPPortIsFatal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, errOut := runCmd(t, "-data", t.TempDir(), "-nats-port", "-1", "-http", ln.Addr().String())
	if code != 1 || !strings.Contains(errOut, "serving HTTP on "+ln.Addr().String()) {
		t.Fatalf("exit %d, stderr %q; want a fatal error naming the address", code, errOut)
	}
}

func TestScanTables(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	r, err := runner.Start(ctx, runner.Config{Deployment: runner.Deployment{DataDir: dir, NATSPort: -1, Logger: slog.New(slog.DiscardHandler)}, HTTPAddr: "off"}, framework.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("docs", []byte("d1"), framework.Column{Family: "f", Qualifier: "q"}, []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCmd(t, "scan", "-data", dir)
	if code != 0 || !strings.Contains(out, "docs\n") {
		t.Errorf("scan without a table: exit %d, output %q; want the list of tables", code, out)
	}
	code, out, _ = runCmd(t, "scan", "-data", dir, "docs")
	if code != 0 || !strings.Contains(out, `"d1"`) {
		t.Errorf("scan docs: exit %d, output %q", code, out)
	}
	code, _, errOut := runCmd(t, "scan", "-data", dir, "NOSUCHTABLE")
	if code != 1 || !strings.Contains(errOut, `"NOSUCHTABLE" holds no data`) || !strings.Contains(errOut, "docs") {
		t.Errorf("scan of a missing table: exit %d, stderr %q", code, errOut)
	}
}

// The documented TRICKLE_NATS_* variables reach the connection to a -nats
// URL, and a credential or TLS file that cannot be read is fatal.
func TestNATSCredentialVariables(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, Authorization: "s3cret", NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	defer ns.Shutdown()
	url := ns.ClientURL()
	args := []string{"status", "-nats", url, "-connect-timeout", "1s", "-data", t.TempDir()}

	t.Setenv("TRICKLE_NATS_TOKEN", "s3cret")
	// Authenticated, the command finds no store there (none serves one).
	if code, _, errOut := runCmd(t, args...); code != 1 || !strings.Contains(errOut, "no store answers on "+url) || strings.Contains(errOut, "authentication") {
		t.Errorf("with TRICKLE_NATS_TOKEN: exit %d, stderr %q; want to get past authentication", code, errOut)
	}
	t.Setenv("TRICKLE_NATS_TOKEN", "wrong")
	if code, _, errOut := runCmd(t, args...); code != 1 || !strings.Contains(errOut, "authentication failed") {
		t.Errorf("with a wrong token: exit %d, stderr %q; want an authentication error", code, errOut)
	}
	t.Setenv("TRICKLE_NATS_TOKEN", "")
	t.Setenv("TRICKLE_NATS_TLS_CA", "/nonexistent/ca.pem")
	if code, _, errOut := runCmd(t, args...); code != 1 || !strings.Contains(errOut, "TRICKLE_NATS_TLS_CA") || !strings.Contains(errOut, "/nonexistent/ca.pem") {
		t.Errorf("with an unreadable CA file: exit %d, stderr %q; want a fatal error naming the variable and the file", code, errOut)
	}
}

// Rule: removing a published observer is an explicit command, and it
// removes what it names only: unpublish of an observer that is not
// published fails naming those that are, and removes nothing.
func TestUnpublishRemovesTheNamedObservers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	reg := framework.NewRegistry()
	noop := func(context.Context, *framework.Txn, []byte, framework.Column) error { return nil }
	for _, o := range []framework.Observer{
		{Name: "retired", Table: "old", Columns: []framework.Column{{Family: "f", Qualifier: "q"}}, Kind: framework.Strong, Fn: noop},
		{Name: "current", Table: "docs", Columns: []framework.Column{{Family: "f", Qualifier: "q"}}, Kind: framework.Strong, Fn: noop},
	} {
		if err := reg.Register(o); err != nil {
			t.Fatal(err)
		}
	}
	r, err := runner.Start(ctx, runner.Config{Deployment: runner.Deployment{DataDir: dir, NATSPort: -1, Logger: slog.New(slog.DiscardHandler)}, HTTPAddr: "off"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tables := func() []string {
		t.Helper()
		ts, err := admin.ObservedTables(ctx, r.Node().Store())
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	if code, _, errOut := runCmd(t, "unpublish"); code != 1 || !strings.Contains(errOut, "unpublish takes the observers") {
		t.Errorf("unpublish without observers: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut := runCmd(t, "unpublish", "-data", dir, "retired", "nobody")
	if code != 1 || !strings.Contains(errOut, `"nobody"`) || !strings.Contains(errOut, "current, retired") {
		t.Errorf("unpublish of an observer that is not published: exit %d, stderr %q; want 1, naming the published ones", code, errOut)
	}
	if got := tables(); !slices.Equal(got, []string{"docs", "old"}) {
		t.Fatalf("after a failed unpublish the observed tables are %q, want docs and old", got)
	}
	code, out, _ := runCmd(t, "unpublish", "-data", dir, "retired")
	if code != 0 || !strings.Contains(out, "unpublished 1 columns of retired") {
		t.Errorf("unpublish retired: exit %d, output %q", code, out)
	}
	if got := tables(); !slices.Equal(got, []string{"docs"}) {
		t.Fatalf("after unpublish retired the observed tables are %q, want docs only", got)
	}
}
