package tikv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tikv/client-go/v2/oracle"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
	"github.com/trickle-dev/trickle/store/tikv"
)

// TestOracle: PD timestamps increase and have the framework's layout (the
// physical part is the wall clock in milliseconds).
func TestOracle(t *testing.T) {
	s := openMock(t, mockOptions{})
	o := s.Oracle()
	prev := uint64(0)
	for range 100 {
		ts, err := o.Timestamp(bg)
		if err != nil {
			t.Fatal(err)
		}
		if ts <= prev {
			t.Fatalf("timestamp %d after %d", ts, prev)
		}
		prev = ts
	}
	if ms := oracle.ExtractPhysical(prev); ms != int64(prev>>18) {
		t.Fatalf("physical part %d, want ts>>18 = %d", ms, prev>>18)
	}
	s.Close()
	if _, err := o.Timestamp(bg); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Timestamp after Close: %v", err)
	}
}

// TestRoutedLogs: client-go's log lines reach the slog handler given.
func TestRoutedLogs(t *testing.T) {
	var buf bytes.Buffer
	lw := &lockedWriter{w: &buf}
	tikv.RouteClientLogs(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() { tikv.RouteClientLogs(quiet.Handler()) })
	// Opening a store on a fresh mock cluster makes the client log.
	openMock(t, mockOptions{})
	tikv.RouteClientLogs(quiet.Handler())
	lw.mu.Lock()
	out := buf.String()
	lw.mu.Unlock()
	if !strings.Contains(out, "component=tikv-client") {
		t.Fatalf("no client log line routed; got %q", out)
	}
}

// lockedWriter serializes writes of client goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRegisterMetrics: the client's metrics land on every registry given,
// not on the default one.
func TestRegisterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := tikv.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	s := openMock(t, mockOptions{})
	if _, err := s.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: counter, Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) == 0 {
		t.Fatalf("%d metric families gathered, err %v", len(mfs), err)
	}
	def, _ := prometheus.DefaultGatherer.Gather()
	for _, mf := range def {
		if strings.HasPrefix(mf.GetName(), "tikv_client_go") {
			t.Fatalf("client metric %s on the default registry", mf.GetName())
		}
	}
	// Again on the same registry: nothing to do. On another (a second
	// deployment in the process): the same metrics there too.
	if err := tikv.RegisterMetrics(reg); err != nil {
		t.Fatalf("registering twice on one registry: %v", err)
	}
	other := prometheus.NewRegistry()
	if err := tikv.RegisterMetrics(other); err != nil {
		t.Fatal(err)
	}
	if mfs2, err := other.Gather(); err != nil || len(mfs2) != len(mfs) {
		t.Fatalf("second registry: %d metric families, err %v; want %d", len(mfs2), err, len(mfs))
	}
}

// TestOpenUnreachable: Open of a cluster nobody serves ends, within its
// connect timeout, in an error naming the PD address.
func TestOpenUnreachable(t *testing.T) {
	const addr = "127.0.0.1:1"
	_, err := tikv.Open(bg, []string{addr}, &tikv.Options{ConnectTimeout: 300 * time.Millisecond, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open of %s: %v, want an error naming it", addr, err)
	}
}

// TestOptions: bad options are named.
func TestOptions(t *testing.T) {
	for _, c := range []struct {
		o    tikv.Options
		want string
	}{
		{tikv.Options{Namespace: "a\x00b"}, "Namespace"},
		{tikv.Options{CAPath: "ca.pem"}, "CAPath"},
		{tikv.Options{ScanBatchSize: -1}, "ScanBatchSize"},
		{tikv.Options{RetryBackoffMin: time.Second, RetryBackoffMax: time.Millisecond}, "RetryBackoffMin"},
		{tikv.Options{Groups: map[string]string{"": "g"}}, "empty family"},
	} {
		o := c.o
		o.EnsureDefaults()
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error about %s", c.o, err, c.want)
		}
	}
}

// TestRealCluster runs the conformance suite against a real TiKV cluster.
// Set TRICKLE_TEST_PD to its PD endpoints (comma-separated host:port); each
// subtest uses a fresh namespace, which it leaves behind.
func TestRealCluster(t *testing.T) {
	pds := os.Getenv("TRICKLE_TEST_PD")
	if pds == "" {
		t.Skip("set TRICKLE_TEST_PD=host:port[,host:port...] to the PD endpoints of a TiKV cluster to run this test")
	}
	run := time.Now().UnixNano()
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		defer cancel()
		s, err := tikv.Open(ctx, strings.Split(pds, ","), &tikv.Options{
			Namespace: fmt.Sprintf("trickle-test-%d-%d", run, n), Groups: storetest.Groups, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
