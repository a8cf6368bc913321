package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/runner"
)

func TestParseStoreURL(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []string
		tikv    bool
		wantErr string
	}{
		{in: "", tikv: false},
		{in: "tikv://pd1:2379", want: []string{"pd1:2379"}, tikv: true},
		{in: "tikv://pd1:2379,10.0.0.2:2379/", want: []string{"pd1:2379", "10.0.0.2:2379"}, tikv: true},
		{in: "tikv://[::1]:2379", want: []string{"[::1]:2379"}, tikv: true},
		{in: "pd1:2379", wantErr: "want tikv://"},
		{in: "tikv://", wantErr: "names no PD endpoint"},
		{in: "tikv://pd1", wantErr: `"pd1" is not HOST:PORT`},
		{in: "tikv://pd1:2379,", wantErr: `"" is not HOST:PORT`},
		{in: "tikv://pd1:99999", wantErr: "port \"99999\""},
		{in: "tikv://pd1:x", wantErr: "port \"x\""},
		{in: "tikv://u@pd1:2379", wantErr: "not HOST:PORT"},
	} {
		pd, tikv, err := runner.ParseStoreURL(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseStoreURL(%q) = %v, %v; want an error containing %q", c.in, pd, err, c.wantErr)
			}
			continue
		}
		if err != nil || tikv != c.tikv || strings.Join(pd, " ") != strings.Join(c.want, " ") {
			t.Errorf("ParseStoreURL(%q) = %q, %v, %v; want %q, %v", c.in, pd, tikv, err, c.want, c.tikv)
		}
	}
}

// A deployment on TiKV is refused before anything connects when it lacks
// what it needs or names what does not apply.
func TestTiKVDeploymentValidation(t *testing.T) {
	base := func() runner.Deployment {
		return runner.Deployment{Store: "tikv://pd1:2379", NATSURL: "nats://nats1:4222", DataDir: t.TempDir(), Logger: quiet()}
	}
	for _, c := range []struct {
		name    string
		tweak   func(*runner.Deployment)
		wantErr string
		is      error
	}{
		{"no NATS", func(d *runner.Deployment) { d.NATSURL = "" }, "-nats", runner.ErrNATSRequired},
		{"owner mode", func(d *runner.Deployment) { d.Mode = runner.ModeOwner }, "no process owns it", nil},
		{"store id", func(d *runner.Deployment) { d.StoreID = "abc" }, "store id (abc)", nil},
		{"half TLS", func(d *runner.Deployment) { d.TiKV.CAPath = "ca.pem" }, "a CA, a certificate and a key", nil},
		{"bad URL", func(d *runner.Deployment) { d.Store = "tikv://pd1" }, "not HOST:PORT", nil},
	} {
		d := base()
		c.tweak(&d)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := runner.Open(ctx, d)
		cancel()
		if err == nil {
			n.Close()
			t.Errorf("%s: Open succeeded", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.wantErr) || c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v; want an error containing %q (and matching %v)", c.name, err, c.wantErr, c.is)
		}
	}
}

// A process that names a TiKV store whose PD does not answer fails within
// its connect timeout, naming the addresses, and never opens a local store
// instead.
func TestUnreachablePDFailsInTime(t *testing.T) {
	nats := startNATS(t)
	d := runner.Deployment{Store: "tikv://127.0.0.1:1", NATSURL: nats, DataDir: t.TempDir(), ConnectTimeout: time.Second, Logger: quiet()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := runner.Open(ctx, d)
	if err == nil {
		n.Close()
		t.Fatal("Open of an unreachable TiKV store succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("Open took more than the test's deadline: %v", err)
	}
	for _, want := range []string{"127.0.0.1:1", "-store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, serr := runner.ReadStoreID(d.DataDir); serr == nil {
		t.Error("the process made a local store in its data directory")
	}
}
