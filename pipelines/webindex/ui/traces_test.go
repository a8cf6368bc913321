package ui_test

import (
	"context"
	"errors"
	"html"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
	"github.com/trickle-dev/trickle/telemetry"
)

// tracing records every span the process makes into a Recent for the
// test's length.
func tracing(t *testing.T) (*telemetry.Recent, *sdktrace.TracerProvider) {
	t.Helper()
	rec, err := telemetry.NewRecent(&telemetry.RecentOptions{Sample: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		tp.Shutdown(context.Background())
	})
	return rec, tp
}

var traceLink = regexp.MustCompile(`href="trace\?id=([0-9a-f]{32})"`)

// TestTracesPageDrawsTheChainsOfAPage: with the spans of an index's own
// runs recorded, a page's view links to the chains that ran on it, the
// list finds them by page and by observer, and a chain is drawn as a
// waterfall of its spans (the observer run, its transaction) with bars;
// what a span carries is escaped, and a trace no longer kept is 404.
func TestTracesPageDrawsTheChainsOfAPage(t *testing.T) {
	rec, tp := tracing(t)
	h := indexedPages(t, map[string]string{
		"http://a.example/": `<title>A</title><p>alpha</p><a href="http://b.example/">to b</a>`,
		"http://b.example/": `<title>B</title><p>beta</p>`,
	}, ui.WithTraces(rec))
	_, span := tp.Tracer("test").Start(context.Background(), "observer <script>alert(1)</script>")
	span.SetAttributes(attribute.String(telemetry.ObserverAttr, "<script>x</script>"), attribute.String(telemetry.RowAttr, "<b>row</b>"))
	span.RecordError(errors.New("bad <i>thing</i>"))
	span.SetStatus(codes.Error, "bad <i>thing</i>")
	span.End()

	a := url.QueryEscape("http://a.example/")
	_, body := fetch(t, h, "GET", "/page?url="+a)
	if !strings.Contains(body, "How this page got here") || !strings.Contains(body, `href="traces?url=http%3a%2f%2fa.example%2f"`) {
		t.Fatalf("the page's view does not link to its chains:\n%s", body)
	}
	status, body := fetch(t, h, "GET", "/traces?url="+a)
	m := traceLink.FindStringSubmatch(body)
	if status != 200 || m == nil || !strings.Contains(body, "webindex-page") {
		t.Fatalf("GET /traces?url=%s = %d, no chain of webindex-page listed:\n%s", a, status, body)
	}
	if strings.Contains(body, "&lt;script&gt;x") {
		t.Errorf("the list by page shows a chain of another row")
	}
	status, body = fetch(t, h, "GET", "/trace?id="+m[1])
	for _, w := range []string{"observer webindex-page", "<svg", "<rect", "http://a.example/"} {
		if status != 200 || !strings.Contains(body, w) {
			t.Errorf("GET /trace?id=%s = %d, lacks %q", m[1], status, w)
		}
	}
	// The run's transaction: "txn" on either engine (a span per attempt
	// on the protocol engine, one for all attempts on TiKV).
	if !strings.Contains(body, "txn") {
		t.Errorf("GET /trace?id=%s: no transaction span under the run", m[1])
	}
	status, body = fetch(t, h, "GET", "/traces?errors=1")
	if status != 200 || !strings.Contains(body, html.EscapeString("<script>x</script>")) || strings.Contains(body, "<script>x") {
		t.Errorf("GET /traces?errors=1 = %d: the failed chain is missing or not escaped:\n%s", status, body)
	}
	if strings.Contains(body, "webindex-page") {
		t.Errorf("errors only lists chains without an error")
	}
	m = traceLink.FindStringSubmatch(body)
	if m != nil {
		_, body = fetch(t, h, "GET", "/trace?id="+m[1])
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<i>thing") || !strings.Contains(body, "error: bad &lt;i&gt;thing&lt;/i&gt;") {
			t.Errorf("a hostile span's name or error is not escaped:\n%s", body)
		}
	}
	if status, body := fetch(t, h, "GET", "/trace?id=0123456789abcdef0123456789abcdef"); status != 404 || !strings.Contains(body, "kept") {
		t.Errorf("GET /trace of an unknown id = %d: %s", status, body)
	}
	if status, _ := fetch(t, indexedPages(t, map[string]string{"http://c.example/": "<p>c</p>"}), "GET", "/traces"); status != 404 {
		t.Errorf("GET /traces without WithTraces = %d, want 404", status)
	}
}

// TestTracesInBrowser reads the traces pages in a real headless Chromium,
// without JavaScript: the list of chains, a page's chains by following
// its view's link, and one chain's waterfall, of which it takes a
// screenshot (go test -artifacts keeps it in the output directory).
// Skipped when no Chromium is installed (CI installs one).
func TestTracesInBrowser(t *testing.T) {
	bin := browser()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: install chromium to run this test")
	}
	rec, _ := tracing(t)
	srv := httptest.NewServer(indexedPages(t, map[string]string{
		"http://a.example/": `<title>A</title><p>alpha</p><a href="http://b.example/">to b</a>`,
		"http://b.example/": `<title>B</title><p>beta</p>`,
	}, ui.WithTraces(rec)))
	defer srv.Close()

	dom := dumpDOM(t, bin, srv.URL+"/page?url="+url.QueryEscape("http://a.example/"))
	m := regexp.MustCompile(`href="(traces\?url=[^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's view in the browser links to no chain:\n%s", dom)
	}
	dom = dumpDOM(t, bin, srv.URL+"/"+html.UnescapeString(m[1]))
	id := traceLink.FindStringSubmatch(dom)
	if id == nil || !strings.Contains(dom, "webindex-page") {
		t.Fatalf("the page's chains in the browser:\n%s", dom)
	}
	u := srv.URL + "/trace?id=" + id[1]
	dom = dumpDOM(t, bin, u)
	for _, want := range []string{`id="waterfall"`, "observer webindex-page", "<rect"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the waterfall in the browser lacks %q:\n%s", want, dom)
		}
	}
	shot := filepath.Join(t.ArtifactDir(), "trace.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--window-size=1200,900", "--screenshot="+shot, u)
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("no screenshot: %v: %s", err, out)
	} else if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Errorf("the screenshot %s is missing or empty: %v", shot, err)
	} else {
		t.Logf("screenshot of the waterfall: %s", shot)
	}
}
