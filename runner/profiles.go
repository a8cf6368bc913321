package runner

import (
	"net/http"
	"net/http/pprof"
)

// mountProfiles serves Go's runtime profiles under /debug/pprof/ on mux,
// as net/http/pprof does on the default mux: where a runner's CPU goes
// under a real load is a question for `go tool pprof
// http://ADDR/debug/pprof/profile?seconds=30`, answered by the process
// itself rather than by rebuilding it with profiling. The runner's HTTP
// address is local unless configured otherwise; a runner exposed beyond
// it exposes these too.
func mountProfiles(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
