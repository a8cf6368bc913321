package notify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/percolator"
	"github.com/trickle-dev/trickle/internal/protocol"
)

var colD = Column{Family: "c", Qualifier: "d"}

// Attributes of the transaction spans, as the engine records them.
const attrTxnResult = attribute.Key("trickle.txn.outcome")

// tracedEnv is an observer environment whose DBs record spans in memory.
func tracedEnv(t *testing.T, observers ...framework.Observer) (*obsEnv, *tracetest.InMemoryExporter, trace.Tracer) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	e := newEnv(t)
	reg := framework.NewRegistry()
	for _, o := range observers {
		if err := reg.Register(o); err != nil {
			t.Fatal(err)
		}
	}
	db := e.db(t, "worker", func(o *percolator.Options) { o.Observed = observedBy(reg); o.TracerProvider = tp })
	return &obsEnv{env: e, reg: reg, main: db, w: NewProcessor(frontDB(db), reg)}, exp, tp.Tracer("test")
}

func copyObserver(name string, from, to Column) framework.Observer {
	return framework.Observer{Name: name, Table: "t", Columns: []Column{from}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
			v, err := tx.Get(ctx, "t", row, c)
			if err != nil {
				return err
			}
			return tx.Set("t", row, to, append(v, '+'))
		}}
}

func spansNamed(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// committedTxnUnder returns the committed "txn" span whose parent is span.
func committedTxnUnder(t *testing.T, spans tracetest.SpanStubs, parent trace.SpanContext) tracetest.SpanStub {
	t.Helper()
	for _, s := range spansNamed(spans, "txn") {
		if s.Parent.SpanID() == parent.SpanID() && attr(s, attrTxnResult).AsString() == "committed" {
			return s
		}
	}
	t.Fatalf("no committed txn span under %s", parent.SpanID())
	return tracetest.SpanStub{}
}

// Rule: a chain of observers A→B→C triggered by one traced write is one
// trace: each observer run is the child of the transaction that wrote the
// column it observes, and links to it.
func TestTraceObserverChain(t *testing.T) {
	e, exp, tracer := tracedEnv(t, copyObserver("A", colA, colB), copyObserver("B", colB, colC), copyObserver("C", colC, colD))
	ctx, load := tracer.Start(context.Background(), "load")
	if err := e.main.Update(ctx, func(ctx context.Context, tx *percolator.Txn) error {
		return tx.Set("t", []byte("r"), colA, []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	load.End()
	e.drain(t)
	if got := e.get(t, "r", colD); got != "v+++" {
		t.Fatalf("end of chain = %q", got)
	}

	spans := exp.GetSpans()
	writer := committedTxnUnder(t, spans, load.SpanContext())
	for _, name := range []string{"A", "B", "C"} {
		runs := spansNamed(spans, "observer "+name)
		if len(runs) != 1 {
			t.Fatalf("%d spans for observer %s, want 1", len(runs), name)
		}
		run := runs[0]
		if run.SpanContext.TraceID() != load.SpanContext().TraceID() {
			t.Errorf("observer %s is in trace %s, want the load's %s", name, run.SpanContext.TraceID(), load.SpanContext().TraceID())
		}
		if run.Parent.SpanID() != writer.SpanContext.SpanID() {
			t.Errorf("observer %s's parent is %s, want the writing txn %s", name, run.Parent.SpanID(), writer.SpanContext.SpanID())
		}
		if len(run.Links) != 1 || run.Links[0].SpanContext.SpanID() != writer.SpanContext.SpanID() {
			t.Errorf("observer %s links %v, want the writing txn", name, run.Links)
		}
		if got := attr(run, attrOutcome).AsString(); got != "ran" {
			t.Errorf("observer %s outcome %q", name, got)
		}
		if got := attr(run, attrObserver).AsString(); got != name {
			t.Errorf("observer attribute %q, want %q", got, name)
		}
		writer = committedTxnUnder(t, spans, run.SpanContext)
	}
}

// Rule: a run that settles several writers' notifications (message
// collapsing) links to every writer; its parent is the newest.
func TestTraceCollapsedRunLinksEveryWriter(t *testing.T) {
	e, exp, tracer := tracedEnv(t, copyObserver("A", colA, colB))
	var writers []trace.SpanID
	for i := range 3 {
		ctx, load := tracer.Start(context.Background(), "load"+strconv.Itoa(i))
		if err := e.main.Update(ctx, func(ctx context.Context, tx *percolator.Txn) error {
			writers = append(writers, trace.SpanContextFromContext(ctx).SpanID())
			return tx.Set("t", []byte("r"), colA, []byte(strconv.Itoa(i)))
		}); err != nil {
			t.Fatal(err)
		}
		load.End()
	}
	e.drain(t)
	runs := spansNamed(exp.GetSpans(), "observer A")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1 collapsed run", len(runs))
	}
	run := runs[0]
	linked := map[trace.SpanID]bool{}
	for _, l := range run.Links {
		linked[l.SpanContext.SpanID()] = true
	}
	for i, w := range writers {
		if !linked[w] {
			t.Errorf("run does not link writer %d (%s); links %v", i, w, run.Links)
		}
	}
	if len(run.Links) != 3 || attr(run, attrNotified).AsInt64() != 3 {
		t.Errorf("run has %d links for %d notifications, want 3 and 3", len(run.Links), attr(run, attrNotified).AsInt64())
	}
	if run.Parent.SpanID() != writers[2] {
		t.Errorf("run's parent is %s, want the newest writer %s", run.Parent.SpanID(), writers[2])
	}
	if c := e.w.Stats().Collapsed.Load(); c != 2 {
		t.Errorf("collapsed %d, want 2", c)
	}
}

// notifyValues returns the values of the notify cells of row r.
func notifyValues(t *testing.T, e *obsEnv, col Column) []protocol.Notify {
	t.Helper()
	cells, err := e.st.ReadRow(context.Background(), "t", []byte("r"), []Column{protocol.NotifyColumn(col)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []protocol.Notify
	for _, c := range cells {
		nv, err := protocol.DecodeNotify(c.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, nv)
	}
	return out
}

// Rule: untraced writers store notifications as they always did, with no
// trace context; traced ones carry their transaction's traceparent.
func TestNotificationTraceContextOnlyWhenTraced(t *testing.T) {
	e := newObsEnv(t, copyObserver("A", colA, colB))
	e.set(t, e.main, "r", colA, "v")
	if ns := notifyValues(t, e, colA); len(ns) != 1 || ns[0].Trace != nil || !ns[0].HasWriter {
		t.Fatalf("untraced notification = %+v, want a writer and no trace", ns)
	}

	te, _, tracer := tracedEnv(t, copyObserver("A", colA, colB))
	ctx, span := tracer.Start(context.Background(), "load")
	var txnSpan trace.SpanContext
	if err := te.main.Update(ctx, func(ctx context.Context, tx *percolator.Txn) error {
		txnSpan = trace.SpanContextFromContext(ctx)
		return tx.Set("t", []byte("r"), colA, []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	span.End()
	ns := notifyValues(t, te, colA)
	want := fmt.Sprintf("00-%s-%s-%s", txnSpan.TraceID(), txnSpan.SpanID(), txnSpan.TraceFlags())
	if len(ns) != 1 || string(ns[0].Trace) != want {
		t.Fatalf("traced notification = %+v, want trace %s", ns, want)
	}
	if sc := parseTraceParent(ns[0].Trace); !sc.Equal(txnSpan.WithRemote(true)) {
		t.Fatalf("traceparent decodes to %v, want %v", sc, txnSpan)
	}
}

// Rule: an observer run that fails records the error on its span, and the
// error carries the span context for logging.
func TestTraceFailedRun(t *testing.T) {
	boom := errors.New("boom")
	e, exp, _ := tracedEnv(t, framework.Observer{Name: "fail", Table: "t", Columns: []Column{colA}, Kind: framework.Strong,
		Fn: func(context.Context, *framework.Txn, []byte, Column) error { return boom }})
	e.set(t, e.main, "r", colA, "v")
	_, err := e.w.Process(context.Background(), Notification{Table: "t", Row: []byte("r"), Column: colA})
	if !errors.Is(err, boom) {
		t.Fatalf("process: %v", err)
	}
	runs := spansNamed(exp.GetSpans(), "observer fail")
	if len(runs) != 1 || attr(runs[0], attrOutcome).AsString() != "failed" || runs[0].Status.Description == "" {
		t.Fatalf("failed run spans: %+v", runs)
	}
	if sc := SpanContextOf(err); sc.SpanID() != runs[0].SpanContext.SpanID() {
		t.Errorf("SpanContextOf(err) = %v, want the run's span", sc)
	}
}
