package percolator

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// tracedEnv is an environment whose worker DB records spans in memory.
func tracedEnv(t *testing.T) (*env, *DB, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	e := newEnv(t)
	return e, e.db(t, "worker", func(o *Options) { o.TracerProvider = tp }), exp
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

// Rule: resolving a lock is a span with its outcome; a reader that meets a
// committed transaction's secondary lock rolls it forward.
func TestTraceLockResolution(t *testing.T) {
	e, main, exp := tracedEnv(t)
	crash := errors.New("crash")
	dying := e.db(t, "dying", func(o *Options) {
		o.DisableOnePhase = true // the faults are two-phase steps
		o.Faults = func(step CommitStep, _ uint64) error {
			if step == StepCommitted {
				return crash
			}
			return nil
		}
	})
	err := dying.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		tx.Set("t", []byte("a"), colA, []byte("1"))
		return tx.Set("t", []byte("b"), colA, []byte("1"))
	})
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("commit: %v", err)
	}
	if err := main.View(context.Background(), func(ctx context.Context, tx *Txn) error {
		_, err := tx.Get(ctx, "t", []byte("b"), colA)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	res := spansNamed(spans, "resolve lock")
	if len(res) != 1 {
		t.Fatalf("%d resolve spans, want 1", len(res))
	}
	if got := attr(res[0], attrOutcome).AsString(); got != resolveRolledForward {
		t.Errorf("resolution outcome %q, want %q", got, resolveRolledForward)
	}
	view := spansNamed(spans, "txn")
	if len(view) != 1 || res[0].Parent.SpanID() != view[0].SpanContext.SpanID() {
		t.Errorf("resolve span is not a child of the reading transaction")
	}
	if got := main.Stats().RolledForward.Load(); got != 1 {
		t.Errorf("rolled forward %d", got)
	}
}
