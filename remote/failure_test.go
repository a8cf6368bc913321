package remote

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/store"
)

// within fails the test if f takes longer than d: no failure may hang.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if el := time.Since(start); el > d {
		t.Errorf("%s took %v, want < %v", what, el, d)
	}
}

func TestServiceStopped(t *testing.T) {
	env := newStoreEnv(t)
	if _, err := env.client.Tables(bg, ""); err != nil {
		t.Fatal(err)
	}
	if err := env.svc.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := env.svc.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	within(t, 2*time.Second, "requests to a stopped service", func() {
		_, err := env.client.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r")})
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("Apply: %v, want ErrUnavailable", err)
		}
		_, err = collect(env.client.Scan(bg, store.ScanRequest{Table: "t"}))
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("Scan: %v, want ErrUnavailable", err)
		}
	})
}

func TestStoreClosedBehindService(t *testing.T) {
	env := newStoreEnv(t)
	env.db.Close()
	_, err := env.client.ReadRow(bg, "t", []byte("r"), []store.Column{col("f", "")}, nil)
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("ReadRow on a closed store: %v, want store.ErrClosed", err)
	}
}

func TestClientClosed(t *testing.T) {
	env := newStoreEnv(t)
	env.client.Close()
	env.client.Close()
	if _, err := env.client.Tables(bg, ""); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Tables after Close: %v, want store.ErrClosed", err)
	}
}

func TestConnectionClosed(t *testing.T) {
	ns := startNATS(t)
	svc, err := ServeStore(connect(t, ns), openMem(t), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	nc := connect(t, ns)
	c, err := NewStore(nc)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	within(t, time.Second, "request on a closed connection", func() {
		if _, err := c.Tables(bg, ""); !errors.Is(err, ErrUnavailable) || !errors.Is(err, nats.ErrConnectionClosed) {
			t.Errorf("Tables: %v, want ErrUnavailable", err)
		}
	})
}

// TestServerGoneWhileReconnecting: with the NATS server down and the
// connection trying to reconnect, a request waits no longer than its
// context allows.
func TestServerGoneWhileReconnecting(t *testing.T) {
	ns := startNATS(t)
	svc, err := ServeStore(connect(t, ns), openMem(t), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := NewStore(nc, WithRequestTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ns.Shutdown()
	within(t, 2*time.Second, "requests while the server is gone", func() {
		ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		defer cancel()
		if _, err := c.Tables(ctx, ""); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnavailable) {
			t.Errorf("Tables with a deadline: %v", err)
		}
		// Without a deadline the client's request timeout applies.
		if _, err := c.Tables(bg, ""); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnavailable) {
			t.Errorf("Tables without a deadline: %v", err)
		}
	})
}

// blockingStore holds every Apply until its context ends.
type blockingStore struct {
	store.Store
	entered chan struct{}
}

func (b *blockingStore) Apply(ctx context.Context, _ *store.RowTxn) (store.RowResult, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	return store.RowResult{FailedCheck: -1}, ctx.Err()
}

// TestSlowServer: a caller's deadline bounds its wait, the server learns
// the deadline and gives up too, and Stop waits for the handler.
func TestSlowServer(t *testing.T) {
	ns := startNATS(t)
	bs := &blockingStore{Store: openMem(t), entered: make(chan struct{}, 1)}
	svc, err := ServeStore(connect(t, ns), bs, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewStore(connect(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	within(t, time.Second, "Apply against a stuck server", func() {
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		defer cancel()
		if _, err := c.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("r")}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Apply: %v, want DeadlineExceeded", err)
		}
	})
	<-bs.entered
	within(t, time.Second, "Stop with a handler bounded by the client's deadline", func() {
		if err := svc.Stop(); err != nil {
			t.Error(err)
		}
	})
}
