package remote

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// refusedAtOnce reports whether err says that no service took the request:
// no responders, or the service's own "stopping" answer. A request that
// was sent into the void and timed out is ErrUnavailable too, but not
// refused at once: it made its caller wait out the request timeout.
func refusedAtOnce(err error) bool {
	return errors.Is(err, ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) &&
		(errors.Is(err, nats.ErrNoResponders) || strings.Contains(err.Error(), "service stopping"))
}

// TestServiceStopped: requests to a stopped service are refused, never
// left to time out.
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
	_, err := env.client.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r")})
	if !refusedAtOnce(err) {
		t.Errorf("Apply: %v, want ErrUnavailable for no responders or a stopping service", err)
	}
	_, err = storetest.Collect(env.client.Scan(bg, store.ScanRequest{Table: "t"}))
	if !refusedAtOnce(err) {
		t.Errorf("Scan: %v, want ErrUnavailable for no responders or a stopping service", err)
	}
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

// TestConnectionClosed: a request on a closed connection fails with the
// connection's own error, not by waiting for an answer that cannot come.
func TestConnectionClosed(t *testing.T) {
	ns := startNATS(t)
	svc, err := ServeStore(connect(t, ns), openMem(t), quietService(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	nc := connect(t, ns)
	c, err := NewStore(nc, &ClientOptions{RequestTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	err = await(t, "Tables on a closed connection", func() error { _, err := c.Tables(bg, ""); return err })
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("Tables: %v, want ErrUnavailable wrapping nats.ErrConnectionClosed", err)
	}
}

// TestServerGoneWhileReconnecting: with the NATS server down and the
// connection trying to reconnect, a request ends with its caller's
// context, or without one, with the client's request timeout.
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
	reconnecting := nc.StatusChanged(nats.RECONNECTING)
	ns.Shutdown()
	recv(t, reconnecting, "the connection noticing that its server is gone")

	// The client's own timeout is an hour: only the caller's deadline
	// can end this request.
	patient, err := NewStore(nc, &ClientOptions{RequestTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	err = await(t, "Tables with a 200ms deadline", func() error { _, err := patient.Tables(ctx, ""); return err })
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() == nil {
		t.Errorf("Tables with a deadline: %v, want the caller's context.DeadlineExceeded", err)
	}

	// Without a deadline the client's request timeout applies, and the
	// error says that no answer came within it.
	c, err := NewStore(nc, &ClientOptions{RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = await(t, "Tables without a deadline, request timeout 300ms", func() error { _, err := c.Tables(bg, ""); return err })
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "within 300ms") {
		t.Errorf("Tables without a deadline: %v, want ErrUnavailable: no answer within 300ms", err)
	}
}

// blockingStore holds every Apply until its context ends or release is
// closed, saying when one starts (entered) and how its context stood when
// it returned (exited).
type blockingStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
	exited  chan error
}

func newBlockingStore(t *testing.T) *blockingStore {
	return &blockingStore{Store: openMem(t), entered: make(chan struct{}, 4), release: make(chan struct{}), exited: make(chan error, 4)}
}

// releaseAll lets every held Apply return. It is idempotent, so that a
// failing test can release its handlers before stopping the service.
func (b *blockingStore) releaseAll() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *blockingStore) Apply(ctx context.Context, _ *store.RowTxn) (store.RowResult, error) {
	b.entered <- struct{}{}
	select {
	case <-ctx.Done():
	case <-b.release:
	}
	err := ctx.Err()
	b.exited <- err
	return store.RowResult{FailedCheck: -1}, err
}

// TestSlowServer: a caller's deadline bounds its wait, the server learns
// the deadline and gives up too, and Stop waits for a running handler,
// whose answer still reaches its caller.
func TestSlowServer(t *testing.T) {
	ns := startNATS(t)
	bs := newBlockingStore(t)
	stopWaits := make(chan int, 8)
	// Neither side's own timeout (an hour) can end a request here: only
	// the caller's deadline, or the store being released.
	svc, err := ServeStore(connect(t, ns), bs, quietService(&ServiceOptions{HandlerTimeout: time.Hour,
		onStopWait: func(n int) {
			select {
			case stopWaits <- n:
			default:
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	defer bs.releaseAll() // before Stop, which waits for held handlers
	c, err := NewStore(connect(t, ns), &ClientOptions{RequestTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	txn := &store.RowTxn{Table: "t", Row: []byte("r")}

	// A deadline long enough that the request is surely sent before it
	// passes; nothing here depends on how long it is.
	ctx, cancel := context.WithTimeout(bg, time.Second)
	defer cancel()
	err = await(t, "Apply with a deadline against a stuck server", func() error { _, err := c.Apply(ctx, txn); return err })
	// The caller's context, or the server holding the same deadline, may
	// end the request first.
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Apply: %v, want context.DeadlineExceeded", err)
	}
	recv(t, bs.entered, "the stuck Apply reaching the store")
	if err := recv(t, bs.exited, "the server giving up the stuck Apply at the client's deadline"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the handler's context ended with %v, want context.DeadlineExceeded", err)
	}

	// Stop while a handler runs: it must wait for the handler, which then
	// answers its caller.
	applied := make(chan error, 1)
	go func() { _, err := c.Apply(bg, txn); applied <- err }()
	recv(t, bs.entered, "the second Apply reaching the store")
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Stop() }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a handler was running", err)
	case <-stopWaits:
	case <-time.After(hangGuard):
		t.Fatal("Stop neither returned nor waited for the running handler")
	}
	bs.releaseAll()
	if err := recv(t, bs.exited, "the released handler returning"); err != nil {
		t.Errorf("the handler's context ended (%v) before it was released: Stop cut a running handler short", err)
	}
	if err := recv(t, stopped, "Stop returning once the handler is done"); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := recv(t, applied, "the answer of the handler Stop waited for"); err != nil {
		t.Errorf("Apply that was running during Stop: %v, want its answer", err)
	}
}

// TestMicroStats: the service is visible to NATS tooling, and error
// responses are counted per endpoint.
func TestMicroStats(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	for range 3 {
		if _, err := env.client.Apply(bg, &store.RowTxn{Table: "t"}); err == nil {
			t.Fatal("Apply without a row succeeded")
		}
	}
	subj, err := micro.ControlSubject(micro.StatsVerb, "trickle-store", "")
	if err != nil {
		t.Fatal(err)
	}
	nc := connect(t, env.ns)
	// micro counts a request once its handler returns, which may be after
	// the worker answered, and says nothing when it does: poll the stats,
	// each poll a round trip, until the count shows or hangGuard passes.
	var apply *micro.EndpointStats
	var st micro.Stats
	for deadline := time.Now().Add(hangGuard); ; {
		msg, err := nc.Request(subj, nil, hangGuard)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(msg.Data, &st); err != nil {
			t.Fatal(err)
		}
		apply = nil
		for _, ep := range st.Endpoints {
			if ep.Subject == "trickle.store.apply" {
				apply = ep
			}
		}
		if apply != nil && apply.NumRequests >= 3 || time.Now().After(deadline) {
			break
		}
	}
	if apply == nil || apply.NumRequests != 3 || st.Version != serviceVersion {
		t.Fatalf("stats %+v, apply %+v; want version %s and 3 apply requests", st, apply, serviceVersion)
	}
	// Our own error count is taken before the answer is sent: exact.
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
	for _, ep := range []string{storeApply, storeApplyAll, storeReadRow, storeReadRows, storeScan, storeTables} {
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
