package ui_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
)

// browser returns the path of an installed Chromium (or Chrome), or "".
func browser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// dumpDOM loads u in headless Chromium and returns the document as the
// browser built it. The UI's pages forbid every script of their own
// (Content-Security-Policy: script-src 'none'), so what the browser shows
// is what a reader without JavaScript gets. (Disabling JavaScript in the
// browser instead would also disable --dump-dom.)
func dumpDOM(t *testing.T, bin, u string, flags ...string) string {
	t.Helper()
	// A browser that crashes (a signal, not a timeout: it happens to
	// headless Chromium on a loaded machine, twice in a row during a full
	// race-detector run) gets two more tries.
	for attempt := 1; ; attempt++ {
		dom, crashed, err := runBrowser(t, bin, u, flags)
		if err == nil {
			return dom
		}
		if !crashed || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; trying again", attempt, err)
	}
}

// runBrowser runs one headless Chromium dumping u's DOM, for at most 90s.
func runBrowser(t *testing.T, bin, u string, flags []string) (dom string, crashed bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + t.TempDir()}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, "--dump-dom", u)...)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return "", false, fmt.Errorf("%s did not dump %s within 90s: %s", bin, u, stderr.String())
	}
	if err != nil {
		var exit *exec.ExitError
		crashed = errors.As(err, &exit) && !exit.Exited()
		return "", crashed || strings.Contains(stderr.String(), "Segmentation fault"), fmt.Errorf("%s --dump-dom %s: %v: %s", bin, u, err, stderr.String())
	}
	return string(out), false, nil
}

var nextLink = regexp.MustCompile(`rel="next" href="([^"]*)"`)

// TestInBrowser reads the UI in a real headless Chromium, without
// JavaScript: the overview, a search (as its form submits it), the next page of
// results by following the page's own link, and a page's view. It is
// skipped when no Chromium is installed (CI installs one).
func TestInBrowser(t *testing.T) {
	bin := browser()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: install chromium to run this test")
	}
	srv := httptest.NewServer(indexed(t))
	defer srv.Close()

	dom := dumpDOM(t, bin, srv.URL+"/")
	for _, want := range []string{`<dd id="pages">33</dd>`, "Top pages", "1–20 of 33"} {
		if !strings.Contains(dom, want) {
			t.Errorf("overview in the browser lacks %q:\n%s", want, dom)
		}
	}

	first := srv.URL + "/search?q=" + url.QueryEscape("event loop")
	dom = dumpDOM(t, bin, first)
	if !strings.Contains(dom, "30 matching pages") || !strings.Contains(dom, "<mark>event</mark> <mark>loop</mark>") {
		t.Fatalf("search in the browser:\n%s", dom)
	}
	if strings.Contains(dom, "<script>alert") {
		t.Errorf("a title became markup in the browser:\n%s", dom)
	}
	m := nextLink.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no link to the next page of results:\n%s", dom)
	}
	base, _ := url.Parse(first)
	next, err := base.Parse(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	dom = dumpDOM(t, bin, next.String())
	if !strings.Contains(dom, "21–30 of 30") || strings.Contains(dom, `rel="next"`) {
		t.Errorf("second page of results in the browser:\n%s", dom)
	}

	dom = dumpDOM(t, bin, srv.URL+"/page?url="+url.QueryEscape("http://hub.example/"))
	if !strings.Contains(dom, "<h1>Hub</h1>") || !strings.Contains(dom, "All 30 inlinks") {
		t.Errorf("page view in the browser:\n%s", dom)
	}
}

// TestScriptInBrowser runs the single-page script (Handler) in headless
// Chromium against the JSON API: its search view pages, and marks the
// snippets' terms by their byte ranges, multi-byte characters included.
func TestScriptInBrowser(t *testing.T) {
	bin := browser()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: install chromium to run this test")
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", indexed(t))
	mux.Handle("/", ui.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	// The virtual time budget lets the script's requests finish before the
	// document is dumped.
	dom := dumpDOM(t, bin, srv.URL+"/#/search?q="+url.QueryEscape("event loop")+"&offset=20", "--virtual-time-budget=10000")
	for _, want := range []string{"30 matching pages", "21–30 of 30", "<mark>event</mark> <mark>loop</mark>", `rel="prev"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("script's search view lacks %q:\n%s", want, dom)
		}
	}
	dom = dumpDOM(t, bin, srv.URL+"/#/search?q="+url.QueryEscape("naïve"), "--virtual-time-budget=10000")
	if !strings.Contains(dom, "<mark>naïve</mark> café") {
		t.Errorf("script's snippet with multi-byte text:\n%s", dom)
	}
}
