package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/runner"
	"github.com/trickle-dev/trickle/store"
)

// TestMain lets the test binary stand in for the loader binary: tests
// start it with TRICKLE_TEST_LOADER=1 and the loader's arguments.
func TestMain(m *testing.M) {
	if os.Getenv("TRICKLE_TEST_LOADER") == "1" {
		main()
		os.Exit(0) // not reached: main exits
	}
	os.Exit(m.Run())
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func writeFile(t *testing.T, path, data string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func page(title string) string {
	return fmt.Sprintf("<html><title>%s</title><p>text of %s</p></html>", title, strings.ToLower(title))
}

func warcResponse(uri, body string) string {
	block := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return fmt.Sprintf("WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: %s\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n", uri, len(block), block)
}

func gzipped(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	io.WriteString(w, s)
	w.Close()
	return b.String()
}

// load runs the loader command in this process.
func load(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = run(ctx, args, &out, &errb)
	t.Logf("loader %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// summary parses the summary's "name  value" lines.
func summary(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 13 {
			m[strings.TrimSpace(line[:12])] = strings.Fields(line[13:])[0]
		}
	}
	return m
}

func wantSummary(t *testing.T, out string, want map[string]string) {
	t.Helper()
	got := summary(out)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("summary %s = %q, want %q", k, got[k], v)
		}
	}
}

// storePages opens the store a loader left in dataDir (the loader has
// exited) and returns its pages (URL → title) and pending notifications.
func storePages(t *testing.T, dataDir string) (map[string]string, int) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(filepath.Join(dataDir, "store"), framework.StoreOptions(&store.Options{Logger: quiet}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, err := oracle.NewServer(oracle.NewFilePersister(filepath.Join(dataDir, "oracle")), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	db, err := framework.Open(ctx, st, ts, &framework.Options{Observers: webindex.Observers(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := webindex.New(nil)
	var urls []string
	err = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: schema.PagesTable, Columns: []framework.Column{schema.Doc}}) {
			if err != nil {
				return err
			}
			urls = append(urls, string(e.Row))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, u := range urls {
		pv, err := ix.Page(ctx, db, u)
		if err != nil {
			t.Fatal(err)
		}
		pages[u] = pv.Title
	}
	n, err := admin.Pending(ctx, st, []string{schema.PagesTable})
	if err != nil {
		t.Fatal(err)
	}
	return pages, n
}

// TestDirectStore: with no runner, the loader opens the store in the data
// directory itself; a clean run exits 0, a run with a bad record exits 2
// after loading everything else.
func TestDirectStore(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	site := filepath.Join(dir, "site")
	writeFile(t, filepath.Join(site, "index.html"), page("Home"))
	writeFile(t, filepath.Join(site, "docs", "a.htm"), page("A"))
	writeFile(t, filepath.Join(site, "docs", "b.html"), page("B"))
	writeFile(t, filepath.Join(site, "docs", "readme.txt"), "not a page")
	common := []string{"-data", data, "-nats-port", "-1", "-log-level", "warn"}

	code, out, _ := load(t, append(common, "--dir", site, "--base-url", "http://site.example/")...)
	if code != exitOK {
		t.Fatalf("exit %d, want 0", code)
	}
	wantSummary(t, out, map[string]string{"loaded": "3", "skipped": "1", "bad": "0", "failed": "0", "unchanged": "0"})

	feed := writeFile(t, filepath.Join(dir, "feed.jsonl"), strings.Join([]string{
		`{"url":"http://site.example/index.html","delete":true}`,
		`{"url": broken`,
		fmt.Sprintf(`{"url":"http://feed.example/","html":%q}`, page("Feed")),
	}, "\n"))
	w1 := writeFile(t, filepath.Join(dir, "one.warc.gz"), gzipped(warcResponse("http://warc.example/1", page("W1"))))
	w2 := writeFile(t, filepath.Join(dir, "two.warc"), warcResponse("http://warc.example/2", page("W2")))
	// --warc with two files (the second a positional argument), flags
	// after them, then the directory again, which brings back the page the
	// feed deleted. One page per transaction, so that the deletion and the
	// page coming back are not in one batch.
	code, out, errOut := load(t, append(common, "-batch", "1", "--warc", w1, w2, "--jsonl", feed, "--dir", site, "--base-url", "http://site.example")...)
	if code != exitBad {
		t.Fatalf("exit %d, want 2", code)
	}
	wantSummary(t, out, map[string]string{"loaded": "4", "deleted": "1", "bad": "1", "failed": "0", "unchanged": "2"})
	if !strings.Contains(errOut, "feed.jsonl") || !strings.Contains(errOut, "line=2") {
		t.Errorf("the bad line is not reported with its file and line:\n%s", errOut)
	}

	pages, pending := storePages(t, data)
	want := map[string]string{
		"http://site.example/docs/a.htm": "A", "http://site.example/docs/b.html": "B",
		"http://feed.example/": "Feed", "http://warc.example/1": "W1", "http://warc.example/2": "W2",
		// The directory came after the deletion: the page is back.
		"http://site.example/index.html": "Home",
	}
	if !maps.Equal(pages, want) {
		t.Errorf("pages %v, want %v", pages, want)
	}
	if pending == 0 {
		t.Error("no notification pending: the observers would never index the pages")
	}
}

// TestExitStatus runs the binary (this test binary standing in for it)
// and checks the exit status the shell sees.
func TestExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	good := writeFile(t, filepath.Join(dir, "good.jsonl"), fmt.Sprintf(`{"url":"http://x.example/","html":%q}`+"\n", page("X")))
	bad := writeFile(t, filepath.Join(dir, "bad.jsonl"), "{oops\n")
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"clean", []string{good}, exitOK},
		{"bad record", []string{good, bad}, exitBad},
		{"no input", nil, exitFatal},
		{"bad flag", []string{"-no-such-flag"}, exitFatal},
		{"bad batch size", []string{"-batch", "-1", good}, exitFatal},
		{"missing file", []string{"--warc", filepath.Join(dir, "missing.warc")}, exitFatal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-data", filepath.Join(dir, "data"), "-nats-port", "-1", "-log-level", "warn"}, tc.args...)
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), "TRICKLE_TEST_LOADER=1", "GORACE=atexit_sleep_ms=0")
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Errorf("exit %d, want %d; output:\n%s", code, tc.want, out)
			}
		})
	}
}

// TestThroughRunningRunner: when a runner owns the data directory, the
// loader joins it over NATS and the runner's observers index the pages.
func TestThroughRunningRunner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	r := startIndexRunner(t, ctx, data)

	feed := writeFile(t, filepath.Join(dir, "feed.jsonl"), strings.Join([]string{
		`{"url":"http://p.example/","html":"<title>P</title><p>penguin</p><a href=\"http://q.example/\">cue</a>"}`,
		`{"url":"http://q.example/","html":"<title>Q</title><p>quokka</p>"}`,
		`{"url":"http://r.example/","html":"<title>R</title><p>penguin too</p><a href=\"http://q.example/\">queue</a>"}`,
	}, "\n"))
	code, out, errOut := load(t, "-data", data, "-nats", r.Node().Conn().ConnectedUrl(), "--jsonl", feed)
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	wantSummary(t, out, map[string]string{"loaded": "3"})
	if !strings.Contains(errOut, "loading through a running runner") {
		t.Errorf("the loader did not join the runner:\n%s", errOut)
	}
	if stuck, err := runner.Wait(ctx, r.Node(), runner.WaitOptions{Poll: 20 * time.Millisecond}); err != nil || len(stuck) > 0 {
		t.Fatalf("wait: %v %v", stuck, err)
	}
	ix, _ := webindex.New(nil)
	total, res, err := ix.Search(ctx, r.DB(), "penguin", 10)
	if err != nil || total != 2 || len(res) != 2 {
		t.Fatalf("search: %d %v %v", total, res, err)
	}
	pv, err := ix.Page(ctx, r.DB(), "http://q.example/")
	if err != nil || pv.InboundCount != 2 {
		t.Fatalf("page: %+v %v", pv, err)
	}
}

func TestParseArgs(t *testing.T) {
	var cfg config
	fs := newFlagSet(&cfg)
	err := parseArgs(fs, &cfg, []string{"--warc", "a.warc", "b.warc", "--jsonl", "-", "--batch", "7", "c.jsonl", "--dir", "site", "--", "--odd", "d"})
	if err != nil {
		t.Fatal(err)
	}
	want := []inputSpec{{kindWARC, "a.warc"}, {kindAny, "b.warc"}, {kindJSONL, "-"}, {kindAny, "c.jsonl"}, {kindDir, "site"}, {kindAny, "--odd"}, {kindAny, "d"}}
	if !slices.Equal(cfg.inputs, want) || cfg.batch != 7 {
		t.Fatalf("inputs %v batch %d", cfg.inputs, cfg.batch)
	}
	var cfg2 config
	if err := parseArgs(newFlagSet(&cfg2), &cfg2, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
}

func TestProgressLine(t *testing.T) {
	c := loader.Counts{Loaded: 40, Unchanged: 10}
	line := progressLine(c, 100, 10*time.Second)
	for _, s := range []string{"50/100 pages", "5 pages/s", "ETA 10s"} {
		if !strings.Contains(line, s) {
			t.Errorf("%q lacks %q", line, s)
		}
	}
	if line := progressLine(c, -1, 10*time.Second); strings.Contains(line, "ETA") || !strings.Contains(line, "50 pages") {
		t.Errorf("unknown total: %q", line)
	}
	if line := progressLine(loader.Counts{Bad: 2}, -1, time.Second); !strings.Contains(line, "bad 2") {
		t.Errorf("bad records not shown: %q", line)
	}
}

// TestBulkProgressLine: a bulk run's progress line names its phase and
// what the phase has done, never a loaded count or a rate, which stay at
// zero until the import is done.
func TestBulkProgressLine(t *testing.T) {
	for _, c := range []struct {
		st   loader.BulkStatus
		c    loader.Counts
		want string
	}{
		{loader.BulkStatus{Phase: loader.BulkReading}, loader.Counts{Read: 1200}, "bulk reading  1200 records read  3s"},
		{loader.BulkStatus{Phase: loader.BulkParsing}, loader.Counts{Read: 100}, "bulk sorting  100 records read  3s"},
		{loader.BulkStatus{Phase: loader.BulkImporting, Parsed: 100, ToParse: 100, Pages: 98}, loader.Counts{Read: 101, Bad: 3, Skipped: 7}, "bulk computing and importing  98 pages  3s  skipped 7  bad 3"},
	} {
		if got := bulkProgressLine(c.st, c.c, 3*time.Second); got != c.want {
			t.Errorf("%+v: %q, want %q", c.st, got, c.want)
		}
	}
}

// TestConsole: on a terminal, a log line first erases the progress line.
func TestConsole(t *testing.T) {
	var b bytes.Buffer
	c := &console{w: &b, tty: true}
	c.progress("10 pages")
	fmt.Fprint(c, "log line\n")
	c.progress("20 pages")
	c.clear()
	if want := eraseLine + "10 pages" + eraseLine + "log line\n" + eraseLine + "20 pages" + eraseLine; b.String() != want {
		t.Errorf("terminal output %q, want %q", b.String(), want)
	}
	b.Reset()
	c = &console{w: &b}
	c.progress("10 pages")
	fmt.Fprint(c, "log line\n")
	c.clear()
	if want := "progress: 10 pages\nlog line\n"; b.String() != want {
		t.Errorf("plain output %q, want %q", b.String(), want)
	}
}
