package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// serverLogger adapts nats-server's printf-style Logger to slog. The server
// is chatty at startup, so its notices go to Debug: an embedded server stays
// quiet under a default (Info) handler while warnings and errors still show.
type serverLogger struct {
	log *slog.Logger

	mu      sync.Mutex
	lastErr string // last Errorf/Fatalf message, to explain a failed start
}

func newServerLogger(l *slog.Logger) *serverLogger {
	return &serverLogger{log: l.With("component", "nats-server")}
}

func (l *serverLogger) emit(level slog.Level, format string, v []any) string {
	if !l.log.Enabled(context.Background(), level) && level < slog.LevelError {
		return ""
	}
	msg := fmt.Sprintf(format, v...)
	l.log.Log(context.Background(), level, msg)
	return msg
}

func (l *serverLogger) remember(msg string) {
	l.mu.Lock()
	l.lastErr = msg
	l.mu.Unlock()
}

// lastError returns the last error the server logged, or "".
func (l *serverLogger) lastError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

func (l *serverLogger) Noticef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.emit(slog.LevelDebug-4, format, v) }

func (l *serverLogger) Errorf(format string, v ...any) {
	l.remember(l.emit(slog.LevelError, format, v))
}

// Fatalf logs at Error: the embedded server must never exit the process.
// nats-server calls it when it cannot listen, and returns from Start.
func (l *serverLogger) Fatalf(format string, v ...any) {
	l.remember(l.emit(slog.LevelError, format, v))
}
