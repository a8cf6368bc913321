package remote

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

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
	env := newStoreEnv(t, nil, nil)
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
		// No responders, or (while the drained subscription is still
		// there) the service's own "stopping" answer.
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("Apply: %v, want ErrUnavailable", err)
		}
		_, err = collect(env.client.Scan(bg, store.ScanRequest{Table: "t"}))
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("Scan: %v, want ErrUnavailable", err)
		}
	})
}

func TestStoreClosedBehindService(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	env.db.Close()
	_, err := env.client.ReadRow(bg, "t", []byte("r"), []store.Column{col("f", "")}, nil)
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("ReadRow on a closed store: %v, want store.ErrClosed", err)
	}
}

func TestClientClosed(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	env.client.Close()
	env.client.Close()
	if _, err := env.client.Tables(bg, ""); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Tables after Close: %v, want store.ErrClosed", err)
	}
}

func TestConnectionClosed(t *testing.T) {
	ns := startNATS(t)
	svc, err := ServeStore(connect(t, ns), openMem(t), quietService(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	nc := connect(t, ns)
	c, err := NewStore(nc, nil)
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
	svc, err := ServeStore(connect(t, ns), openMem(t), quietService(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := NewStore(nc, &ClientOptions{RequestTimeout: 300 * time.Millisecond})
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
	svc, err := ServeStore(connect(t, ns), bs, quietService(nil))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewStore(connect(t, ns), nil)
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

// TestMicroStats: the service is visible to NATS tooling, and error
// responses are counted per endpoint.
func TestMicroStats(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	for range 3 {
		env.client.Apply(bg, &store.RowTxn{Table: "t"})
	}
	subj, err := micro.ControlSubject(micro.StatsVerb, "trickle-store", "")
	if err != nil {
		t.Fatal(err)
	}
	nc := connect(t, env.ns)
	// micro counts a request when its handler returns, which may be after
	// the worker answered: poll.
	var apply *micro.EndpointStats
	var st micro.Stats
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		msg, err := nc.Request(subj, nil, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(msg.Data, &st); err != nil {
			t.Fatal(err)
		}
		for _, ep := range st.Endpoints {
			if ep.Subject == "trickle.store.apply" {
				apply = ep
			}
		}
		if apply != nil && apply.NumRequests == 3 {
			break
		}
	}
	if apply == nil || apply.NumRequests != 3 || st.Version != serviceVersion {
		t.Fatalf("stats %+v, apply %+v", st, apply)
	}
	var data endpointStats
	if err := json.Unmarshal(apply.Data, &data); err != nil || data.Errors != 3 {
		t.Errorf("apply stats data %s (%v), want 3 errors", apply.Data, err)
	}
}

// TestGarbageRequests: undecodable requests, including another wire
// version, are answered with a protocol error, and the service goes on.
func TestGarbageRequests(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	nc := connect(t, env.ns)
	for _, ep := range []string{storeApply, storeReadRow, storeScan, storeTables} {
		for _, body := range [][]byte{nil, {wireVersion}, {wireVersion + 1, 0}, {wireVersion, 0, 0xff, 0xff, 0xff}} {
			msg, err := nc.Request("trickle.store."+ep, body, time.Second)
			if err != nil {
				t.Fatalf("%s %x: %v", ep, body, err)
			}
			err = responseError(storeService, ep, msg)
			if !errors.Is(err, ErrProtocol) {
				t.Errorf("%s %x: %v, want ErrProtocol", ep, body, err)
			}
		}
	}
	if _, err := env.client.Tables(bg, ""); err != nil {
		t.Fatalf("service broken after garbage: %v", err)
	}
}
