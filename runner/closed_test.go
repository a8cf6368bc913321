package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/runner"
)

// The embedded NATS server of a runner is closed by default: a connection
// without the key kept in the data directory is refused, so another local
// user can neither read pages off the wire nor send raw store requests;
// the data directory and the key file are private to the runner's user.
func TestEmbeddedServerIsClosedByDefault(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	r, err := runner.Start(ctx, runner.Config{Deployment: runner.Deployment{DataDir: dir, NATSPort: -1, Logger: quiet()}, HTTPAddr: "off"}, framework.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	url := r.Node().URL()

	for _, opts := range [][]nats.Option{
		nil,
		{nats.UserInfo("trickle", "guess")},
		{nats.Token("guess")},
	} {
		nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Fatalf("a connection without the data directory's key was accepted (options %v)", opts)
		}
		if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("refused connection: %v, want an authorization error", err)
		}
	}

	key := filepath.Join(dir, cluster.LocalCredentialsFile)
	opt, err := nats.NkeyOptionFromSeed(key)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, opt)
	if err != nil {
		t.Fatalf("the data directory's key was refused: %v", err)
	}
	defer nc.Close()
	st, err := remote.NewStore(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, _, err := st.Identity(ctx); err != nil || id != r.Node().StoreID() {
		t.Fatalf("store identity with the key: %q, %v", id, err)
	}

	for path, want := range map[string]os.FileMode{dir: 0o700, key: 0o600, filepath.Join(dir, "STORE-ID"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %#o, want %#o", path, got, want)
		}
	}
}
