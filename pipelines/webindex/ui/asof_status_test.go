package ui_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
)

// The page and search views read the index as of a past snapshot, say so,
// and keep as_of in their links and search form; a snapshot collected
// since is 410, a bad as_of 400.
func TestPagesAsOf(t *testing.T) {
	ix, err := webindex.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := framework.NewRegistry()
	if err := ix.Register(reg); err != nil {
		t.Fatal(err)
	}
	fw, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{IdleWait: 2 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	ctx := context.Background()
	put := func(u, h string) {
		t.Helper()
		p, err := extract.Parse(u, strings.NewReader(h), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if err := fw.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			_, err := webindex.PutPage(ctx, tx, p)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := fw.WaitForObservers(ctx); err != nil {
			t.Fatal(err)
		}
	}
	put("http://a.example/", `<title>Old title</title><p>walnut tree</p>`)
	var then uint64
	if err := fw.DB().View(ctx, func(ctx context.Context, tx *framework.Txn) error { then = tx.StartTs(); return nil }); err != nil {
		t.Fatal(err)
	}
	put("http://a.example/", `<title>New title</title><p>chestnut tree</p>`)
	h := ui.Server(ix, fw.DB(), quiet)
	asOf := fmt.Sprint(then)
	for _, tt := range []struct {
		path   string
		status int
		want   []string
		not    []string
	}{
		{"/page?url=" + url.QueryEscape("http://a.example/") + "&as_of=" + asOf, 200, []string{"<h1>Old title</h1>", `class="asof"`, "snapshot " + asOf}, []string{"New title"}},
		{"/page?url=" + url.QueryEscape("http://a.example/"), 200, []string{"<h1>New title</h1>"}, []string{`class="asof"`}},
		{"/search?q=walnut&as_of=" + asOf, 200, []string{"1 matching page<", `&amp;as_of=` + asOf + `"`, `name="as_of" value="` + asOf + `"`}, nil},
		{"/search?q=walnut", 200, []string{"0 matching pages"}, []string{`name="as_of"`}},
		{"/search?q=walnut&as_of=later", 400, []string{"as_of"}, nil},
	} {
		status, body := fetch(t, h, "GET", tt.path)
		if status != tt.status {
			t.Errorf("GET %s = %d, want %d: %s", tt.path, status, tt.status, body)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q:\n%s", tt.path, w, body)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(body, w) {
				t.Errorf("GET %s has %q", tt.path, w)
			}
		}
	}
	if _, err := admin.GC(ctx, fw.DB(), 0); err != nil {
		t.Fatal(err)
	}
	if status, body := fetch(t, h, "GET", "/search?q=walnut&as_of="+asOf); status != http.StatusGone || !strings.Contains(body, "-gc-lag") {
		t.Errorf("as of a collected snapshot: %d %s", status, body)
	}
}

// The status page lists observers with their lag, failures with their
// last error (escaped), export queues and workers, reloads itself without
// a script, and is linked from every page; without WithStatus there is
// none.
func TestStatusPage(t *testing.T) {
	ix, err := webindex.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	taken := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	st := &ui.Status{
		Taken:  taken,
		Oracle: "oracle at 470764342115827712",
		Observers: []ui.ObserverStatus{
			{Name: "webindex-page", Kind: "strong", Table: "pages", Pending: 3, Writes: 5, Lag: 1500 * time.Millisecond},
			{Name: "export-webindex", Kind: "weak", Table: "export", Pending: 1, Writes: 9, Failing: 1, Lag: 42 * time.Second},
		},
		Failures: []ui.FailureStatus{{Observer: "export-webindex", Cell: `export/"webindex\x00\x00\x03"/n:webindex`, LastError: `sink: <b>stream gone</b>`, Attempts: 4, Worker: "w1", LastAt: taken, NextRetry: taken.Add(time.Second)}},
		Workers:  []ui.WorkerStatus{{ID: "w1", Info: "host pid 1", Role: "runs observers", Refreshed: 2 * time.Second}},
		Exports:  []ui.ExportStatus{{Queue: "webindex", Observer: "export-webindex", Sink: "JetStream TRICKLE_EXPORT", Entries: 120, Tombstones: 3, Oldest: taken.Add(-42 * time.Second), LastError: "stream gone"}},
	}
	calls := 0
	h := ui.Server(ix, nil, quiet, ui.WithStatus(func(context.Context) (*ui.Status, error) {
		calls++
		if calls == 2 {
			return nil, errors.New("the deployment's NATS is unreachable")
		}
		return st, nil
	}))
	status, body := fetch(t, h, "GET", "/status")
	if status != 200 {
		t.Fatalf("GET /status = %d: %s", status, body)
	}
	for _, w := range []string{`http-equiv="refresh"`, "webindex-page", "1.5s", "42s", "&lt;b&gt;stream gone&lt;/b&gt;", "JetStream TRICKLE_EXPORT", ">120<", "host pid 1", "oracle at 470764342115827712", `href="status"`} {
		if !strings.Contains(body, w) {
			t.Errorf("/status lacks %q:\n%s", w, body)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "<b>") {
		t.Errorf("/status has a script or unescaped markup")
	}
	if status, body := fetch(t, h, "GET", "/status"); status != 500 || !strings.Contains(body, "NATS is unreachable") {
		t.Errorf("a status that cannot be gathered: %d %s", status, body)
	}
	plain := ui.Server(ix, nil, quiet)
	if status, _ := fetch(t, plain, "GET", "/status"); status != 404 {
		t.Errorf("/status without WithStatus = %d, want 404", status)
	}
	if _, body := fetch(t, plain, "GET", "/nope"); strings.Contains(body, `href="status"`) {
		t.Error("a link to a status page that does not exist")
	}
}
