// Package ui serves a small browser interface for the web index.
//
// The web index is queried through a JSON API under /api/ (search, page and
// top). That API is convenient for programs but awkward for a person trying
// to see what the incremental pipeline has computed: which pages were
// clustered as duplicates, what their canonical is, and which links point at
// it. This package exists so that the runner can offer that view directly,
// with no separate front-end build or deployment: a single page, one script
// and one stylesheet, embedded in the binary and working offline.
//
// Server is the interface to mount: every view (an overview of the index
// with the top list, search results with highlighted snippets, a page,
// its inlinks and outlinks, a site's pages, each list paged) is an HTML
// page rendered on the server, so it reads without JavaScript, in any
// browser, and every view is a plain link.
//
// Handler serves the same views as a single-page script instead, for a
// mux that has no index at hand: its page talks only to the JSON API on
// the same origin (/api/overview, /api/top, /api/search, /api/page,
// /api/site, /api/inlinks, /api/outlinks) and routes between its views
// with the URL fragment (#/, #/search?q=…, #/page?url=…, #/site?host=…,
// #/inlinks?url=…, #/outlinks?url=…); it needs JavaScript.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"time"
)

//go:embed static/index.html static/app.js static/style.css
var static embed.FS

// asset is one embedded file with the headers it is served with.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// assets maps the request path (relative to where the handler is mounted)
// to the file served there.
var assets = map[string]asset{
	"/":          load("static/index.html", "text/html; charset=utf-8"),
	"/app.js":    load("static/app.js", "text/javascript; charset=utf-8"),
	"/style.css": load("static/style.css", "text/css; charset=utf-8"),
}

func load(name, contentType string) asset {
	b, err := static.ReadFile(name)
	if err != nil {
		panic("ui: missing embedded file " + name + ": " + err.Error())
	}
	sum := sha256.Sum256(b)
	return asset{b, contentType, `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// Handler returns an http.Handler serving the web index UI: the page at
// "/" and its assets at "/app.js" and "/style.css". Any other path is 404
// and methods other than GET and HEAD are 405.
//
// The page refers to its assets by relative URL and to the API at /api/ on
// the same origin, so the usual mounting is
//
//	mux.Handle("/api/", api)
//	mux.Handle("/", ui.Handler())
//
// Responses carry Cache-Control: no-cache, so browsers revalidate (cheaply,
// by ETag) and always pick up a new binary's UI.
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == "" {
		p = "/"
	}
	a, ok := assets[p]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
