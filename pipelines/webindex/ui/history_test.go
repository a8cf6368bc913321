package ui_test

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
)

// Rule: a History keeps the samples of its window, in time order, and
// drops older ones as newer come.
func TestHistoryKeepsItsWindow(t *testing.T) {
	h := ui.NewHistory(time.Minute)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for i := range 10 {
		h.Add(ui.Sample{At: t0.Add(time.Duration(i) * 15 * time.Second), Runs: uint64(i)})
	}
	h.Add(ui.Sample{At: t0, Runs: 99}) // out of order: dropped
	got := h.Samples()
	if len(got) != 5 || got[0].At != t0.Add(75*time.Second) || got[4].Runs != 9 {
		t.Fatalf("kept %d samples from %v to runs %d; want the 5 of the last minute (75s to 135s)", len(got), got[0].At.Sub(t0), got[len(got)-1].Runs)
	}
}

var polyline = regexp.MustCompile(`<polyline points="([^"]*)" class="s\d"/>`)

// TestStatusPageCharts: with a History the status page draws, as SVG and
// without a script, each observer's pending cells and lag and the
// process's rates over the samples, with each line's last value in its
// legend; a backlog that drains draws a falling line; an observer's name
// is escaped; one sample draws nothing yet.
func TestStatusPageCharts(t *testing.T) {
	ix, err := webindex.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hist := ui.NewHistory(0)
	st := &ui.Status{Taken: time.Now()}
	h := ui.Server(ix, nil, quiet, ui.WithStatus(func(context.Context) (*ui.Status, error) { return st, nil }), ui.WithHistory(hist))
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	hist.Add(ui.Sample{At: t0, Observers: []ui.ObserverSample{{Name: "webindex-page", Pending: 400, Lag: 3 * time.Second}, {Name: "<i>x</i>", Pending: 1}}, Committed: 0, Runs: 0})
	if _, body := fetch(t, h, "GET", "/status"); strings.Contains(body, "<polyline") || !strings.Contains(body, "two samples") {
		t.Errorf("one sample drew a chart, or the page does not say why there is none")
	}
	hist.Add(ui.Sample{At: t0.Add(15 * time.Second), Observers: []ui.ObserverSample{{Name: "webindex-page", Pending: 100, Lag: time.Second}}, Committed: 300, Runs: 150, Conflicts: 3})
	hist.Add(ui.Sample{At: t0.Add(30 * time.Second), Observers: []ui.ObserverSample{{Name: "webindex-page", Pending: 0}}, Committed: 600, Runs: 300, Conflicts: 3})
	status, body := fetch(t, h, "GET", "/status")
	if status != 200 {
		t.Fatalf("GET /status = %d", status)
	}
	for _, w := range []string{`id="pending-chart"`, `id="lag-chart"`, `id="throughput-chart"`, "top: 400", "webindex-page: 0", "transactions/s: 20.0/s", "conflicts/s: 0.0/s", "&lt;i&gt;x&lt;/i&gt;", "last 30s"} {
		if !strings.Contains(body, w) {
			t.Errorf("/status lacks %q", w)
		}
	}
	if strings.Contains(body, "<i>x") || strings.Contains(body, "<script") {
		t.Errorf("/status has unescaped markup or a script")
	}
	// Lines are drawn in the order of the observers' names: "<i>x</i>",
	// then webindex-page.
	lines := polyline.FindAllStringSubmatch(body, -1)
	if len(lines) < 2 {
		t.Fatalf("%d lines drawn", len(lines))
	}
	if got, want := lines[1][1], "0.0,0.0 300.0,75.0 600.0,100.0"; got != want {
		t.Errorf("the draining backlog's line: %q, want %q (400 → 100 → 0 on a box 100 high topped at 400)", got, want)
	}
}

// TestStatusChartsInBrowser reads the status page's charts in a real
// headless Chromium, without JavaScript: the SVG charts and their legends
// are in the document it builds. Skipped without a Chromium.
func TestStatusChartsInBrowser(t *testing.T) {
	bin := browser()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH: install chromium to run this test")
	}
	ix, err := webindex.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hist := ui.NewHistory(0)
	t0 := time.Now().Add(-time.Minute)
	for i, pending := range []int{300, 120, 0} {
		hist.Add(ui.Sample{At: t0.Add(time.Duration(i) * 15 * time.Second), Observers: []ui.ObserverSample{{Name: "webindex-page", Pending: pending}}, Committed: uint64(i * 500)})
	}
	st := &ui.Status{Taken: time.Now()}
	srv := httptest.NewServer(ui.Server(ix, nil, quiet, ui.WithStatus(func(context.Context) (*ui.Status, error) { return st, nil }), ui.WithHistory(hist)))
	defer srv.Close()
	dom := dumpDOM(t, bin, srv.URL+"/status")
	for _, want := range []string{`id="pending-chart"`, `id="throughput-chart"`, "<polyline", "webindex-page: 0", "top: 300"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the status page in the browser lacks %q:\n%s", want, dom)
		}
	}
}
