package runner

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// serveHTTP serves r.Mux on the configured address until ctx ends. The HTTP
// endpoints (query API, UI, metrics) are an add-on to the runner's real work,
// so an address already taken — typically by another runner on the same
// machine — is logged and the runner goes on without them.
func (r *Runner) serveHTTP(ctx context.Context) {
	addr := r.Node.cfg.HTTPAddr
	if addr == "off" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.Node.log.Warn("not serving HTTP", "addr", addr, "err", err)
		return
	}
	r.httpAddr.Store(ln.Addr().String())
	srv := &http.Server{Handler: r.Mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	r.Node.log.Info("serving HTTP", "url", "http://"+ln.Addr().String()+"/")
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		r.Node.log.Error("HTTP server stopped", "err", err)
	}
}

// HTTPAddr returns the address the runner's HTTP server listens on, or ""
// while it is not listening (not yet started, disabled, or address taken).
// Tests that ask for port 0 read the chosen port here.
func (r *Runner) HTTPAddr() string {
	s, _ := r.httpAddr.Load().(string)
	return s
}
