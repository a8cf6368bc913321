// Package telemetry sets up OpenTelemetry for trickle's processes: traces
// exported the standard way (the OTEL_* environment variables), metrics
// served in the Prometheus format by the runner on /metrics, and slog
// handlers that put trace ids on log lines written inside a span.
//
// Setup reads, among others:
//
//	OTEL_TRACES_EXPORTER          otlp, console (JSON lines on stderr, never
//	                              mixed with a command's output), none;
//	                              default: otlp if an OTLP endpoint is set,
//	                              else none (tracing off, at no cost)
//	OTEL_EXPORTER_OTLP_ENDPOINT   e.g. http://localhost:4318 (Jaeger, a collector)
//	OTEL_EXPORTER_OTLP_PROTOCOL   http/protobuf (default) or grpc
//	OTEL_TRACES_SAMPLER(_ARG)     e.g. parentbased_traceidratio and 0.01
//	OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
//	OTEL_METRICS_EXPORTER         otlp or console to push metrics as well as
//	                              serving them on /metrics; default: none
//	OTEL_SDK_DISABLED=true        no tracing, metrics only on /metrics
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Options configure Setup.
type Options struct {
	// ServiceName is the service.name resource attribute unless
	// OTEL_SERVICE_NAME sets one. Default: the program's name.
	ServiceName string
	// Recent, if set, keeps the spans of the latest traces in memory
	// (a runner's traces page draws them): Setup then installs a tracer
	// provider even when no exporter is configured, recording a share of
	// the traces (RecentOptions.Sample, unless OTEL_TRACES_SAMPLER says
	// otherwise). OTEL_SDK_DISABLED=true still turns tracing off.
	Recent *Recent
	// TraceFile, if set, is a file the spans are appended to as JSON
	// lines (the console exporter's format), in place of the exporter
	// OTEL_TRACES_EXPORTER names.
	TraceFile string
	// Console is where the console exporter writes. Default: os.Stderr.
	Console io.Writer
}

var (
	mu      sync.Mutex
	metrics http.Handler // served by runners; set by Setup
)

// Setup configures tracing and metrics from the environment and installs
// them as the global providers (otel.SetTracerProvider, SetMeterProvider)
// and the W3C trace context propagator. Metrics are always collected and
// served by MetricsHandler; traces only when an exporter is configured
// (otherwise the global tracer provider stays the no-op one). shutdown
// flushes and stops the exporters; call it before the program exits.
func Setup(ctx context.Context, opts Options) (shutdown func(context.Context) error, err error) {
	if opts.ServiceName == "" {
		opts.ServiceName = programName()
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", opts.ServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
	)
	if err != nil {
		return nil, err
	}
	var shutdowns []func(context.Context) error
	shutdown = func(ctx context.Context) error {
		var errs []error
		for i := len(shutdowns) - 1; i >= 0; i-- {
			errs = append(errs, shutdowns[i](ctx))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (func(context.Context) error, error) {
		shutdown(ctx)
		return nil, err
	}

	// Metrics: a Prometheus reader for /metrics, plus a push exporter if
	// OTEL_METRICS_EXPORTER asks for one.
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	promReader, handler, err := newPrometheusReader()
	if err != nil {
		return fail(err)
	}
	mopts = append(mopts, sdkmetric.WithReader(promReader))
	if v := os.Getenv("OTEL_METRICS_EXPORTER"); v != "" && v != "none" && v != "prometheus" && !sdkDisabled() {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return fail(err)
		}
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	shutdowns = append(shutdowns, mp.Shutdown)
	otel.SetMeterProvider(mp)

	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	var topts []sdktrace.TracerProviderOption
	switch {
	case sdkDisabled():
	case opts.TraceFile != "":
		f, err := os.OpenFile(opts.TraceFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fail(fmt.Errorf("the trace file: %w", err))
		}
		shutdowns = append(shutdowns, func(context.Context) error { return f.Close() })
		exp, err := stdouttrace.New(stdouttrace.WithWriter(f))
		if err != nil {
			return fail(err)
		}
		topts = append(topts, sdktrace.WithBatcher(exp))
	case os.Getenv("OTEL_TRACES_EXPORTER") == "console":
		// autoexport's console exporter writes to stdout, where a
		// command's own output goes.
		w := opts.Console
		if w == nil {
			w = os.Stderr
		}
		exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
		if err != nil {
			return fail(err)
		}
		topts = append(topts, sdktrace.WithBatcher(exp))
	case tracesWanted():
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return fail(err)
		}
		if !autoexport.IsNoneSpanExporter(exp) {
			// The batch settings come from OTEL_BSP_*.
			topts = append(topts, sdktrace.WithBatcher(exp))
		}
	}
	if opts.Recent != nil && !sdkDisabled() {
		topts = append(topts, sdktrace.WithSpanProcessor(opts.Recent))
		if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
			topts = append(topts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(opts.Recent.Sample()))))
		}
	}
	if len(topts) > 0 {
		// The sampler comes from OTEL_TRACES_SAMPLER(_ARG) unless set above.
		tp := sdktrace.NewTracerProvider(append(topts, sdktrace.WithResource(res))...)
		shutdowns = append(shutdowns, tp.Shutdown)
		otel.SetTracerProvider(tp)
	}
	mu.Lock()
	metrics = handler
	mu.Unlock()
	return shutdown, nil
}

// tracesWanted reports whether the environment asks for trace export: an
// explicit exporter other than none, or an OTLP endpoint.
func tracesWanted() bool {
	if sdkDisabled() {
		return false
	}
	if v := os.Getenv("OTEL_TRACES_EXPORTER"); v != "" {
		return v != "none"
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

func sdkDisabled() bool { return strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") }

func programName() string {
	name := os.Args[0]
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "" {
		return "trickle"
	}
	return name
}

// MetricsHandler serves, in the Prometheus text format, the metrics of the
// meter provider Setup installed; nil if Setup was not called.
func MetricsHandler() http.Handler {
	mu.Lock()
	defer mu.Unlock()
	return metrics
}

// NewPrometheusMeterProvider returns a meter provider of its own (not
// installed globally) and a handler serving its metrics in the Prometheus
// format. Runners use it when the program set up no telemetry, so that
// /metrics always works; tests use it to scrape what they did.
func NewPrometheusMeterProvider() (*sdkmetric.MeterProvider, http.Handler, error) {
	r, h, err := newPrometheusReader()
	if err != nil {
		return nil, nil, err
	}
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), h, nil
}

// newPrometheusReader returns a reader exposing metrics on a registry of
// its own (with the Go runtime and process collectors), and its handler.
func newPrometheusReader() (sdkmetric.Reader, http.Handler, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r, err := promexporter.New(promexporter.WithRegisterer(reg), promexporter.WithoutScopeInfo())
	if err != nil {
		return nil, nil, err
	}
	return r, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}
