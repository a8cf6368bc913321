package tikv

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/pingcap/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tikv/client-go/v2/metrics"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// RouteClientLogs sends the TiKV client's log (client-go logs through a
// process-wide zap logger) to h. Its Info lines (region cache and PD
// chatter) become Debug records, like pebble's in the store package. Open
// calls it with Options.Logger's handler.
func RouteClientLogs(h slog.Handler) {
	log.ReplaceGlobals(zap.New(&slogCore{h: h}), &log.ZapProperties{Core: &slogCore{h: h}, Level: zap.NewAtomicLevelAt(zapcore.DebugLevel)})
}

// slogCore is a zapcore.Core that writes to a slog.Handler.
type slogCore struct {
	h     slog.Handler
	attrs []slog.Attr
}

func level(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.InfoLevel:
		return slog.LevelDebug
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), level(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h, attrs: append(c.attrs[:len(c.attrs):len(c.attrs)], attrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, level(e.Level), e.Message, 0)
	r.AddAttrs(slog.String("component", "tikv-client"))
	r.AddAttrs(c.attrs...)
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

// attrs converts zap fields to slog attributes through zap's own encoder.
func attrs(fields []zapcore.Field) []slog.Attr {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	return out
}

// registered holds the registries the client's metrics were registered on.
var registered struct {
	sync.Mutex
	on map[prometheus.Registerer]bool
}

// RegisterMetrics registers the TiKV client's prometheus metrics on reg.
// They are process-wide collectors: every registry they are registered on
// exports the same values, and registering them on a registry twice does
// nothing. Without it they are kept but exported nowhere.
func RegisterMetrics(reg prometheus.Registerer) (err error) {
	registered.Lock()
	defer registered.Unlock()
	if registered.on[reg] {
		return nil
	}
	// client-go registers its collectors on the default registerer only;
	// point it at reg for the duration of the call.
	saved := prometheus.DefaultRegisterer
	prometheus.DefaultRegisterer = reg
	defer func() {
		prometheus.DefaultRegisterer = saved
		if r := recover(); r != nil {
			err = fmt.Errorf("store/tikv: registering client metrics: %v", r)
		}
	}()
	metrics.RegisterMetrics()
	if registered.on == nil {
		registered.on = make(map[prometheus.Registerer]bool)
	}
	registered.on[reg] = true
	return nil
}
