package runner_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/runner"
)

var (
	colIn  = framework.Column{Family: "f", Qualifier: "in"}
	colMid = framework.Column{Family: "f", Qualifier: "mid"}
	colOut = framework.Column{Family: "f", Qualifier: "out"}
)

// chain registers in → "first" → mid → "second" → out.
func chain(t *testing.T) *framework.Registry {
	t.Helper()
	reg := framework.NewRegistry()
	copyTo := func(name string, from, to framework.Column) framework.Observer {
		return framework.Observer{Name: name, Table: "t", Columns: []framework.Column{from}, Kind: framework.Strong,
			Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c framework.Column) error {
				v, err := tx.Get(ctx, "t", row, c)
				if err != nil {
					return err
				}
				return tx.Set("t", row, to, append(v, '+'))
			}}
	}
	for _, o := range []framework.Observer{copyTo("first", colIn, colMid), copyTo("second", colMid, colOut)} {
		if err := reg.Register(o); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// scrape reads the runner's /metrics into series name{labels} -> value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// series sums the values of every series of a metric whose labels
// include all of want ("k=\"v\"" strings).
func series(m map[string]float64, name string, want ...string) (float64, bool) {
	var sum float64
	found := false
	for k, v := range m {
		base, labels, _ := strings.Cut(k, "{")
		if base != name {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(labels, w)
		}
		if ok {
			sum += v
			found = true
		}
	}
	return sum, found
}

// TestMetricsEndpoint: after some work, the runner's /metrics (served on a
// free port) reports it under the documented names.
func TestMetricsEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := runChain(ctx, t)

	const rows = 10
	for i := range rows {
		if err := r.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("t", []byte("row"+strconv.Itoa(i)), colIn, []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.AwaitNoPending(ctx, r.Node().Store(), []string{"t"}, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for r.HTTPAddr() == "" {
		time.Sleep(10 * time.Millisecond)
	}
	// Observer runs are counted once Process returns, just after the
	// notification is gone: poll until both chains' runs show.
	var m map[string]float64
	for deadline := time.Now().Add(10 * time.Second); ; {
		m = scrape(t, r.HTTPAddr())
		if v, _ := series(m, "trickle_observer_runs_total", `observer="second"`, `outcome="ran"`); v == rows || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	check := func(name string, ok func(float64) bool, labels ...string) {
		t.Helper()
		v, found := series(m, name, labels...)
		if !found {
			t.Errorf("/metrics has no %s%v", name, labels)
			return
		}
		if !ok(v) {
			t.Errorf("%s%v = %v: implausible", name, labels, v)
		}
	}
	eq := func(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
	atLeast := func(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }
	// 10 loads, then 10 runs of each observer, each one transaction.
	check("trickle_txn_committed_total", atLeast(3*rows))
	check("trickle_txn_conflicts_total", atLeast(0))
	check("trickle_txn_aborted_total", eq(0))
	check("trickle_lock_resolutions_total", atLeast(0), `outcome="rolled_forward"`)
	check("trickle_lock_resolutions_total", atLeast(0), `outcome="waited"`)
	check("trickle_observer_runs_total", eq(rows), `observer="first"`, `outcome="ran"`)
	check("trickle_observer_runs_total", eq(rows), `observer="second"`, `outcome="ran"`)
	check("trickle_observer_duration_seconds_count", eq(rows), `observer="first"`, `outcome="ran"`)
	check("trickle_observer_duration_seconds_sum", func(v float64) bool { return v > 0 && v < 60 }, `observer="first"`)
	// The commits name their rows and columns, so the scanners run them
	// without finding them in a scan (found counts what scans see).
	check("trickle_scanner_notifications_found_total", atLeast(0))
	check("trickle_scanner_notifications_named_total", atLeast(1))
	check("trickle_scanner_notifications_dispatched_total", atLeast(2*rows))
	check("trickle_scanner_notifications_inflight", atLeast(0))
	check("trickle_scanner_jumps_total", atLeast(0))
	check("trickle_scanner_hinted_total", atLeast(1)) // the observers' commits name their rows
	check("trickle_scanner_hints_dropped_total", eq(0))
	// The only runner keeps its row locks in process.
	check("trickle_rowlocks_shared", eq(0))
	check("trickle_rowlocks_tries_total", eq(0), `result="acquired"`)
	// Nothing was pending when the first scrape measured the lag.
	check("trickle_observer_pending", eq(0), `observer="second"`)
	check("trickle_observer_lag_seconds", eq(0), `observer="first"`)
	check("trickle_oracle_batch_size_count", atLeast(6*rows))
	check("trickle_oracle_batch_duration_seconds_count", atLeast(6*rows))
	if t.Failed() {
		var names []string
		for k := range m {
			if strings.HasPrefix(k, "trickle") {
				names = append(names, k)
			}
		}
		t.Logf("trickle series: %v", names)
	}
}

// TestTraceAcrossProcesses: a writer with its own store connection (over
// NATS, through the remote store) and its own tracer provider — a second
// process in all but address space — loads a row; the runner's observer
// chain continues the writer's trace: one trace across both.
func TestTraceAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runnerSpans, writerSpans := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
	runnerTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(runnerSpans))
	writerTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(writerSpans))
	defer runnerTP.Shutdown(ctx)
	defer writerTP.Shutdown(ctx)

	cfg := runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, Logger: quiet(), TracerProvider: runnerTP}, HTTPAddr: "off"}
	r, err := runner.Start(ctx, cfg, chain(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() { stop(); <-done }()

	// The writer joins as a client on another machine would: store and
	// oracle over NATS, with the embedded server's key passed explicitly.
	wcfg := runner.Deployment{Mode: runner.ModeClient, NATSURL: r.Node().Conn().ConnectedUrl(), Logger: quiet(), TracerProvider: writerTP, NATS: cluster.ConnectOptions{NKeySeedFile: filepath.Join(cfg.DataDir, cluster.LocalCredentialsFile)}}
	node, err := runner.Open(ctx, wcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	wdb, err := framework.Open(ctx, node.Store(), node.Oracle(), &framework.Options{TracerProvider: writerTP, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	bctx, batch := writerTP.Tracer("loader").Start(ctx, "loader batch")
	if err := wdb.Update(bctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("t", []byte("page"), colIn, []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	batch.End()
	if err := admin.AwaitNoPending(ctx, node.Store(), []string{"t"}, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var second []tracetest.SpanStub
	for deadline := time.Now().Add(10 * time.Second); len(second) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		second = named(runnerSpans.GetSpans(), "observer second")
	}

	wspans := writerSpans.GetSpans()
	wtxn := named(wspans, "txn")
	if len(wtxn) != 1 || wtxn[0].Parent.SpanID() != batch.SpanContext().SpanID() {
		t.Fatalf("writer's txn spans: %v", wtxn)
	}
	rspans := runnerSpans.GetSpans()
	first := named(rspans, "observer first")
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("runner recorded %d runs of first and %d of second, want 1 each", len(first), len(second))
	}
	trace := batch.SpanContext().TraceID()
	for _, s := range append(first, second...) {
		if s.SpanContext.TraceID() != trace {
			t.Errorf("%s in trace %s, want the writer's %s", s.Name, s.SpanContext.TraceID(), trace)
		}
	}
	if first[0].Parent.SpanID() != wtxn[0].SpanContext.SpanID() || !first[0].Parent.IsRemote() {
		t.Errorf("observer first's parent %v, want the writer process's txn %s", first[0].Parent, wtxn[0].SpanContext.SpanID())
	}
	var firstTxn *tracetest.SpanStub
	for _, s := range named(rspans, "txn") {
		if s.Parent.SpanID() == first[0].SpanContext.SpanID() {
			firstTxn = &s
		}
	}
	if firstTxn == nil || second[0].Parent.SpanID() != firstTxn.SpanContext.SpanID() {
		t.Errorf("observer second's parent %v is not observer first's transaction", second[0].Parent)
	}
}

func named(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestProfilesAreServed: a runner serves Go's runtime profiles on its HTTP
// address, so that its CPU can be profiled where it runs.
func TestProfilesAreServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := runChain(ctx, t)
	for r.HTTPAddr() == "" {
		if ctx.Err() != nil {
			t.Fatal("the runner serves no HTTP address")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/profile?seconds=1"} {
		resp, err := http.Get("http://" + r.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("%s: %s with %d bytes, want a profile", path, resp.Status, len(body))
		}
	}
}

// runChain starts and runs a runner of chain serving HTTP on a free port,
// until the test ends.
func runChain(ctx context.Context, t *testing.T) *runner.Runner {
	t.Helper()
	r, err := runner.Start(ctx, runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, Logger: quiet()}, HTTPAddr: "127.0.0.1:0"}, chain(t))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done; r.Close() })
	return r
}
