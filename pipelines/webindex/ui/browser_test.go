package ui_test

import (
	"bytes"
	"context"
	"html"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
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
func dumpDOM(t *testing.T, bin, u string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--dump-dom", u)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("%s did not dump %s within 90s: %s", bin, u, stderr.String())
	}
	if err != nil {
		t.Fatalf("%s --dump-dom %s: %v: %s", bin, u, err, stderr.String())
	}
	return string(out)
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
	for _, want := range []string{`<dd id="pages">32</dd>`, "Top pages", "1–20 of 32"} {
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
