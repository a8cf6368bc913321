package telemetry

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// NewLogHandler wraps h so that log lines carry the trace they belong to.
//
// A record logged with a context holding a valid span
// (logger.InfoContext(ctx, ...) inside a transaction or an observer run)
// gets its trace_id and span_id, which tie the line to the trace in a
// tracing UI.
func NewLogHandler(h slog.Handler) slog.Handler { return &logHandler{h: h} }

type logHandler struct{ h slog.Handler }

func (l *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.h.Handle(ctx, r)
}

func (l *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{h: l.h.WithAttrs(attrs)}
}

func (l *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h: l.h.WithGroup(name)}
}

// NewLogger returns a logger writing text (or JSON lines if json is set) to
// w at level, with trace ids (NewLogHandler).
func NewLogger(w io.Writer, json bool, level slog.Leveler) *slog.Logger {
	o := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if json {
		h = slog.NewJSONHandler(w, o)
	} else {
		h = slog.NewTextHandler(w, o)
	}
	return slog.New(NewLogHandler(h))
}
