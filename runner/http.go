package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// listenHTTP binds the configured HTTP address at start, so that a taken
// address is an error of Start rather than a runner quietly running
// without its API.
func (r *Runner) listenHTTP() error {
	addr := r.cfg.HTTPAddr
	if addr == "off" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("runner: serving HTTP on %s: %w (pick another address with -http, or -http off)", addr, err)
	}
	r.httpLn = ln
	return nil
}

// serveHTTP serves r.mux until ctx ends, at most HTTPMaxConcurrent requests
// at a time.
func (r *Runner) serveHTTP(ctx context.Context) {
	if r.httpLn == nil {
		return
	}
	srv := &http.Server{
		Handler:           limitConcurrency(r.mux, r.cfg.HTTPMaxConcurrent, time.Second),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	r.node.log.Info("serving HTTP", "url", "http://"+r.httpLn.Addr().String()+"/")
	if err := srv.Serve(r.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		r.node.log.Error("HTTP server stopped", "err", err)
	}
}

// limitConcurrency lets at most n requests through h at once; a request
// that finds no slot within wait (or before its client gives up) gets 503.
func limitConcurrency(h http.Handler, n int, wait time.Duration) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case slots <- struct{}{}:
			case <-t.C:
				w.Header().Set("Retry-After", "1")
				http.Error(w, "busy: too many requests at once; try again", http.StatusServiceUnavailable)
				return
			case <-req.Context().Done():
				return
			}
		}
		defer func() { <-slots }()
		h.ServeHTTP(w, req)
	})
}

// HTTPAddr returns the address the runner's HTTP server listens on, or ""
// when HTTP is off. Tests that ask for port 0 read the chosen port here.
func (r *Runner) HTTPAddr() string {
	if r.httpLn == nil {
		return ""
	}
	return r.httpLn.Addr().String()
}
