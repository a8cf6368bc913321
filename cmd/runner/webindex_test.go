package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
)

// TestWebIndexBinaries runs the real flow with the real binaries: a runner
// process, the loader binary loading a directory of HTML over NATS, `runner
// wait`, then queries against the runner's HTTP API, checked against a
// from-scratch computation of the corpus.
func TestWebIndexBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts processes")
	}
	dir, port, httpPort := t.TempDir(), freePort(t), freePort(t)
	c, err := sample.New(sample.Options{Pages: 300, Seed: 5, BaseURL: "http://docs.example/"})
	if err != nil {
		t.Fatal(err)
	}
	pagesDir := filepath.Join(t.TempDir(), "pages")
	if err := c.WriteDir(pagesDir); err != nil {
		t.Fatal(err)
	}
	loaderBin := filepath.Join(t.TempDir(), "loader")
	if out, err := exec.Command("go", "build", "-o", loaderBin, "github.com/trickle-dev/trickle/cmd/loader").CombinedOutput(); err != nil {
		t.Fatalf("building the loader: %v\n%s", err, out)
	}

	startRunner(t, "owner", dir, port, "-http", fmt.Sprintf("127.0.0.1:%d", httpPort))
	load := exec.Command(loaderBin, "-dir", pagesDir, "-base-url", c.BaseURL(), "-data", dir, "-nats-port", fmt.Sprint(port), "-mode", "client", "-log-level", "warn")
	out, err := load.CombinedOutput()
	t.Logf("loader:\n%s", out)
	if err != nil {
		t.Fatalf("loader: %v", err)
	}
	if !strings.Contains(string(out), fmt.Sprint(c.Len())) {
		t.Errorf("loader summary does not mention the %d pages", c.Len())
	}
	wait := exec.Command(os.Args[0], "wait", "-data", dir, "-nats-port", fmt.Sprint(port), "-timeout", "3m", "-log-level", "warn")
	wait.Env = append(os.Environ(), "TRICKLE_TEST_RUNNER=1")
	if out, err := wait.CombinedOutput(); err != nil {
		t.Fatalf("runner wait: %v\n%s", err, out)
	}
	idle := time.Now() // the index as of then is the whole corpus

	pages, err := c.Pages()
	if err != nil {
		t.Fatal(err)
	}
	want := batch.Compute(pages)
	api := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	get := func(path string, into any) int {
		t.Helper()
		resp, err := http.Get(api + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if into != nil {
			if err := json.Unmarshal(body, into); err != nil {
				t.Fatalf("GET %s: %v: %s", path, err, body)
			}
		}
		return resp.StatusCode
	}
	type result struct {
		URL          string
		Title        string
		InboundCount int64 `json:"inbound_count"`
	}
	var top struct{ Results []result }
	get("/api/top?n=10", &top)
	for i, w := range want.Top(10) {
		if i >= len(top.Results) || top.Results[i] != (result{w.URL, w.Title, w.InboundCount}) {
			t.Fatalf("top = %+v, want %+v", top.Results, want.Top(10))
		}
	}
	for i, u := range want.URLs() {
		if i%10 != 0 {
			continue
		}
		w, _ := want.Page(u)
		var got struct {
			Canonical    string
			Rank         int64
			InboundCount int64 `json:"inbound_count"`
			Duplicates   []string
		}
		if status := get("/api/page?url="+url.QueryEscape(u), &got); status != 200 {
			t.Fatalf("page %s: status %d", u, status)
		}
		if got.Canonical != w.Canonical || got.Rank != w.Rank || got.InboundCount != w.InboundCount || len(got.Duplicates) != len(w.Duplicates) {
			t.Errorf("page %s = %+v, want canonical %s rank %d inbound %d duplicates %v", u, got, w.Canonical, w.Rank, w.InboundCount, w.Duplicates)
		}
	}
	var search struct{ Total int }
	q := sample.Word(2)
	get("/api/search?q="+q, &search)
	if wt, _ := want.Search(q, 10); search.Total != wt || wt == 0 {
		t.Errorf("search %q: total %d, want %d", q, search.Total, wt)
	}
	if status := get("/api/page?url="+url.QueryEscape("http://docs.example/never.html"), nil); status != 404 {
		t.Errorf("unknown page: status %d", status)
	}
	for _, path := range []string{"/", "/search?q=" + q, "/app/", "/status", "/page?as_of=" + url.QueryEscape(idle.Format(time.RFC3339Nano)) + "&url=" + url.QueryEscape(want.URLs()[0])} {
		resp, err := http.Get(api + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("UI %s: status %d, content type %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// TestDemo runs the README's main command, `runner demo -once`, as a
// process (on smaller samples), twice in the same directory: each run must
// load both samples, verify them and exit 0, the second starting afresh
// rather than failing on the first one's pages.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo")
	}
	cwd := t.TempDir()
	for run := 1; run <= 2; run++ {
		demo := exec.Command(os.Args[0], "demo", "-once", "-sample", "150", "-http", "127.0.0.1:0", "-log-level", "warn")
		demo.Dir = cwd
		demo.Env = append(os.Environ(), "TRICKLE_TEST_RUNNER=1")
		out, err := demo.CombinedOutput()
		t.Logf("runner demo -once (run %d):\n%s", run, out)
		if err != nil {
			t.Fatalf("runner demo, run %d: %v", run, err)
		}
		for _, want := range []string{"every page, 5 searches and the top list equal a from-scratch computation", "equal to a count from scratch"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("run %d: the demo's report lacks %q", run, want)
			}
		}
		if afresh := strings.Contains(string(out), "starting afresh"); afresh != (run == 2) {
			t.Errorf("run %d: announced starting afresh: %v", run, afresh)
		}
	}
}

// The demo refuses a named data directory that holds anything, and one
// called like its own that it did not make.
func TestDemoRefusesDataItDidNotMake(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "demo", "-once", "-http", "127.0.0.1:0", "-data", full); code != 1 || !strings.Contains(errOut, "is not empty") {
		t.Errorf("demo on a non-empty -data: exit %d, stderr %q", code, errOut)
	}
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Join(demoDir, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd(t, "demo", "-once", "-http", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, "is not the demo's") {
		t.Errorf("demo on a foreign ./%s: exit %d, stderr %q", demoDir, code, errOut)
	}
	if _, err := os.Stat(filepath.Join(demoDir, "x")); err != nil {
		t.Errorf("the demo removed a directory it did not make: %v", err)
	}
}

// The demo checks that its HTTP address is free before it empties the
// previous demo's data: a taken port leaves that data as it was.
func TestDemoChecksHTTPAddressBeforeEmptying(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Chdir(t.TempDir())
	if err := markDemo(demoDir); err != nil {
		t.Fatal(err)
	}
	earlier := filepath.Join(demoDir, "earlier")
	if err := os.WriteFile(earlier, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "demo", "-once", "-http", ln.Addr().String())
	if code != 1 || !strings.Contains(errOut, ln.Addr().String()) || !strings.Contains(errOut, "-http") {
		t.Errorf("demo on a taken address: exit %d, stderr %q; want exit 1 naming the address and -http", code, errOut)
	}
	if strings.Contains(out, "starting afresh") {
		t.Errorf("the demo announced emptying its data: %q", out)
	}
	if _, err := os.Stat(earlier); err != nil {
		t.Errorf("the demo emptied its data before finding the address taken: %v", err)
	}
}
