package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, true, slog.LevelInfo).With("component", "test")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	log.InfoContext(ctx, "inside")
	span.End()
	log.InfoContext(context.Background(), "outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log: %q", buf.String())
	}
	var in, out map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &out); err != nil {
		t.Fatal(err)
	}
	if in["trace_id"] != span.SpanContext().TraceID().String() || in["span_id"] != span.SpanContext().SpanID().String() || in["component"] != "test" {
		t.Errorf("line inside a span: %v", in)
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("line outside a span has a trace id: %v", out)
	}
}

func TestSetupFromEnvironment(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_SERVICE_NAME", "setup-test")
	shutdown, err := Setup(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	_, span := otel.Tracer("t").Start(context.Background(), "s")
	if !span.IsRecording() {
		t.Error("Setup with OTEL_TRACES_EXPORTER=console installed no recording tracer")
	}
	span.End()
	c, err := otel.Meter("t").Int64Counter("setup.test.things", metric.WithUnit("{thing}"))
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 3)
	h := MetricsHandler()
	if h == nil {
		t.Fatal("no metrics handler after Setup")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if body := rec.Body.String(); !strings.Contains(body, "setup_test_things_total 3") || !strings.Contains(body, `service_name="setup-test"`) {
		t.Errorf("/metrics:\n%s", body)
	}
}

func TestTracingOffByDefault(t *testing.T) {
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
	if tracesWanted() {
		t.Error("traces wanted with no exporter configured")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")
	if !tracesWanted() {
		t.Error("traces not wanted with an OTLP endpoint")
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if tracesWanted() {
		t.Error("traces wanted with the SDK disabled")
	}
}

// Rule: the console exporter writes its spans where Options.Console says
// (stderr by default), never to stdout, where a command's output goes;
// and a TraceFile receives them in the same format.
func TestConsoleSpansStayOutOfStdout(t *testing.T) {
	stdout := os.Stdout
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout = w
	defer func() { os.Stdout = stdout }()

	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	var console bytes.Buffer
	shutdown, err := Setup(context.Background(), Options{Console: &console})
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("t").Start(context.Background(), "to the console")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	printed, _ := io.ReadAll(r)
	if len(printed) != 0 {
		t.Errorf("spans on stdout: %s", printed)
	}
	if !strings.Contains(console.String(), `"Name":"to the console"`) {
		t.Errorf("the console writer got %q", console.String())
	}

	file := filepath.Join(t.TempDir(), "spans.jsonl")
	shutdown, err = Setup(context.Background(), Options{TraceFile: file})
	if err != nil {
		t.Fatal(err)
	}
	_, span = otel.Tracer("t").Start(context.Background(), "to the file")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), `"Name":"to the file"`) {
		t.Errorf("the trace file: %q, %v", b, err)
	}
}
