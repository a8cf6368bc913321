package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
)

// The UI is mounted at the root of the mux that serves the JSON API under
// /api/; the page then finds both its assets and the API on the same origin.
func ExampleHandler() {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		// Stands in for the web index JSON API.
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"results": []any{}})
	})
	mux.Handle("/", ui.Handler())

	for _, path := range []string{"/", "/app.js", "/style.css", "/api/top?n=5", "/missing"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// / 200 text/html; charset=utf-8
	// /app.js 200 text/javascript; charset=utf-8
	// /style.css 200 text/css; charset=utf-8
	// /api/top?n=5 200 application/json
	// /missing 404 text/plain; charset=utf-8
}
