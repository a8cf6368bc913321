package loader_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

func TestDirLoadReloadChange(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "index.html"), []byte(html("Home")))
	writeFile(t, filepath.Join(root, "a", "b.htm"), []byte(html("B")))
	writeFile(t, filepath.Join(root, "a", "c.HTML"), []byte(html("C")))
	writeFile(t, filepath.Join(root, "a", "notes.txt"), []byte("not a page"))
	if err := os.Symlink(filepath.Join(root, "index.html"), filepath.Join(root, "link.html")); err != nil {
		t.Skip("symlinks unsupported:", err)
	}
	want := map[string]string{
		"http://site.example/index.html": "Home",
		"http://site.example/a/b.htm":    "B",
		"http://site.example/a/c.HTML":   "C",
	}
	load := func() (loader.Summary, []loader.Problem) {
		var st input.Stats
		opts := loader.Options{Stats: &st}
		return e.load(input.Dir(root, "http://site.example", input.Options{Stats: &st}), opts)
	}

	s, ps := load()
	if s.Read != 3 || s.Loaded != 3 || s.Skipped != 2 || s.Bad != 0 || !s.OK() {
		t.Fatalf("first load: %+v", s)
	}
	if !maps.Equal(s.SkipReasons, map[string]int64{input.SkipNonHTMLFile: 1, loader.ReasonSymlink: 1}) {
		t.Errorf("skip reasons %v", s.SkipReasons)
	}
	if len(ps) != 1 || ps[0].Kind != loader.Skipped || ps[0].Source != filepath.Join(root, "link.html") {
		t.Errorf("problems %v, want the symlink reported", ps)
	}
	e.wantPages(want)
	// Written directly into a store no runner ever ran on: the page
	// observer must be notified all the same.
	if n := e.pending(); n != 3 {
		t.Errorf("%d pending notifications, want 3", n)
	}

	s, _ = load()
	if s.Unchanged != 3 || s.Loaded+s.Replaced+s.Deleted != 0 || !s.OK() {
		t.Fatalf("reload: %+v", s)
	}

	writeFile(t, filepath.Join(root, "a", "b.htm"), []byte(html("B2")))
	s, _ = load()
	if s.Replaced != 1 || s.Unchanged != 2 || s.Loaded != 0 || !s.OK() {
		t.Fatalf("reload after a change: %+v", s)
	}
	want["http://site.example/a/b.htm"] = "B2"
	e.wantPages(want)
	checkAccounting(t, s)
}

func sampleWARC() []byte {
	return bytes.Join([][]byte{
		warcRec("warcinfo", "", []byte("software: test\r\n")),
		warcRec("request", "http://a.example/", []byte("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")),
		htmlResp("http://a.example/", "A"),
		warcRec("response", "http://a.example/logo.png", httpResp(200, "image/png", "\x89PNG")),
		warcRec("response", "http://a.example/missing", httpResp(404, "text/html", html("404"))),
		warcRec("response", "http://b.example/x", httpResp(200, "application/xhtml+xml", html("B"))),
	}, nil)
}

func TestWARC(t *testing.T) {
	plain := sampleWARC()
	var members []byte
	for _, rec := range bytes.SplitAfter(plain, []byte("\r\n\r\nWARC")) {
		members = append(members, gz(rec)...) // records split oddly: still one stream
	}
	for name, data := range map[string][]byte{"plain.warc": plain, "whole.warc.gz": gz(plain), "members.warc.gz": members} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			path := writeFile(t, filepath.Join(t.TempDir(), name), data)
			var st input.Stats
			s, ps := e.load(input.WARC(path, input.Options{Stats: &st}), loader.Options{Stats: &st})
			if s.Loaded != 2 || s.Read != 2 || !s.OK() || len(ps) != 0 {
				t.Fatalf("summary %+v, problems %v", s, ps)
			}
			wantSkip := map[string]int64{"warc-type:warcinfo": 1, "warc-type:request": 1, "content-type:image/png": 1, "http-status:404": 1}
			if !maps.Equal(s.SkipReasons, wantSkip) || s.Skipped != 4 {
				t.Errorf("skipped %d %v, want %v", s.Skipped, s.SkipReasons, wantSkip)
			}
			e.wantPages(map[string]string{"http://a.example/": "A", "http://b.example/x": "B"})
		})
	}
}

func TestJSONLWithDeletes(t *testing.T) {
	e := newEnv(t)
	first := `{"url":"http://a.example/","html":"<title>A</title>"}
{"url":"http://b.example/","html":"<title>B</title>"}
{"url":"http://c.example/","html":"<title>C</title>"}
`
	s, _ := e.load(input.JSONL("first.jsonl", strings.NewReader(first), input.Options{}), loader.Options{})
	if s.Loaded != 3 || !s.OK() {
		t.Fatalf("first: %+v", s)
	}
	second := `{"url":"http://a.example/","html":"<title>A</title>"}
{"url":"http://B.example:80/#top","delete":true}
{"url":"http://c.example/","html":"<title>C2</title>"}
{"url":"http://never.example/","delete":true}
{"url":"http://e.example/","html":"<title>E</title>"}
`
	s, ps := e.load(input.JSONL("second.jsonl", strings.NewReader(second), input.Options{}), loader.Options{})
	if s.Deleted != 1 || s.Replaced != 1 || s.Unchanged != 2 || s.Loaded != 1 || !s.OK() || len(ps) != 0 {
		t.Fatalf("second: %+v %v", s, ps)
	}
	e.wantPages(map[string]string{"http://a.example/": "A", "http://c.example/": "C2", "http://e.example/": "E"})
	checkAccounting(t, s)
}

// TestSameURLInBatch: within a batch the last usable record of a URL (by
// its normalized form) wins; a bad record does not replace a good one.
func TestSameURLInBatch(t *testing.T) {
	e := newEnv(t)
	s, ps := e.load(records(
		put("http://dup.example/", html("v1")),
		put("HTTP://DUP.example:80/#x", html("v2")),
		put("http://gone.example/", html("gone")),
		del("http://gone.example/"),
		put("http://badlast.example/", html("good")),
		put("http://badlast.example/", "\x00\x01\x02 binary"),
	), loader.Options{Concurrency: 1, FlushInterval: -1})
	if s.Superseded != 2 || s.Loaded != 2 || s.Unchanged != 1 || s.Bad != 1 || len(ps) != 1 {
		t.Fatalf("summary %+v, problems %v", s, ps)
	}
	if p := ps[0]; p.Reason != loader.ReasonNotHTML || p.Source != "mem" || p.Offset != 5 || p.URL != "http://badlast.example/" {
		t.Errorf("problem %+v", p)
	}
	e.wantPages(map[string]string{"http://dup.example/": "v2", "http://badlast.example/": "good"})
	checkAccounting(t, s)
}

// TestSlowSourceIsFlushed: records of a source that pauses are written
// without waiting for their batch to fill up.
func TestSlowSourceIsFlushed(t *testing.T) {
	e := newEnv(t)
	const url = "http://slow.example/"
	stored := func() bool {
		err := e.db.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			_, err := tx.Get(ctx, schema.PagesTable, []byte(url), schema.Doc)
			return err
		})
		if err != nil && !errors.Is(err, framework.ErrNotFound) {
			t.Error(err)
		}
		return err == nil
	}
	src := func(yield func(input.Record, error) bool) {
		if !yield(put(url, html("slow")), nil) {
			return
		}
		// The source now blocks until the page is in the store.
		for deadline := time.Now().Add(time.Minute); !stored(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Error("the record waited for a full batch")
				return
			}
		}
		yield(put("http://fast.example/", html("fast")), nil)
	}
	s, _ := e.load(src, loader.Options{FlushInterval: 10 * time.Millisecond})
	if s.Loaded != 2 {
		t.Fatalf("summary %+v", s)
	}
}

// TestOrderAcrossBatches: with small batches run concurrently, the records
// of one URL still apply in input order. Each URL's versions are adjacent
// in the input, so a loader that spread them over its goroutines would
// commit them out of order.
func TestOrderAcrossBatches(t *testing.T) {
	e := newEnv(t)
	const urls, versions = 61, 9
	var recs []input.Record
	u := func(i int) string {
		return "http://order.example/" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	for i := range urls {
		for v := 1; v <= versions; v++ {
			recs = append(recs, put(u(i), html(u(i)+" v"+string(rune('0'+v)))))
		}
	}
	want := map[string]string{}
	for i := range urls {
		if i%4 == 0 {
			recs = append(recs, del(u(i)))
		} else {
			want[u(i)] = u(i) + " v9"
		}
	}
	s, ps := e.load(records(recs...), loader.Options{BatchSize: 2, Concurrency: 4})
	if !s.OK() || len(ps) != 0 || s.Loaded != urls || s.Deleted != (urls+3)/4 {
		t.Fatalf("summary %+v problems %v", s, ps)
	}
	e.wantPages(want)
	checkAccounting(t, s)
}

// TestConcurrentLoaders: two loaders (two DBs, as two processes would have)
// load overlapping inputs at once; the overlap is loaded exactly once.
func TestConcurrentLoaders(t *testing.T) {
	e1 := newEnv(t)
	e2 := newEnvOn(t, e1.st, e1.ts)
	page := func(i int) input.Record {
		url := "http://many.example/" + strings.Repeat("p", 1+i%7) + "/" + string(rune('A'+i%26)) + "/" + strings.Repeat("n", i/26)
		return put(url, html(url))
	}
	var a, b []input.Record
	want := map[string]string{}
	for i := range 150 {
		a = append(a, page(i))
	}
	for i := 224; i >= 75; i-- { // the other way round: more contention
		b = append(b, page(i))
	}
	for i := range 225 {
		want[page(i).URL] = page(i).URL
	}
	opts := loader.Options{BatchSize: 8, Concurrency: 4}
	type result struct {
		s   loader.Summary
		ps  []loader.Problem
		err error
	}
	done := make(chan result, 2)
	for _, job := range []struct {
		e    *env
		recs []input.Record
	}{{e1, a}, {e2, b}} {
		go func() {
			s, ps, err := job.e.tryLoad(context.Background(), records(job.recs...), opts)
			done <- result{s, ps, err}
		}()
	}
	r1, r2 := <-done, <-done
	for _, r := range []result{r1, r2} {
		if r.err != nil || !r.s.OK() || len(r.ps) != 0 {
			t.Fatalf("loader: %v %+v %v", r.err, r.s, r.ps)
		}
		checkAccounting(t, r.s)
	}
	if l := r1.s.Loaded + r2.s.Loaded; l != 225 {
		t.Errorf("loaded %d pages in all, want 225", l)
	}
	if u := r1.s.Unchanged + r2.s.Unchanged; u != 75 {
		t.Errorf("%d unchanged, want the 75 pages of the overlap", u)
	}
	e1.wantPages(want)
}

// TestObserversIndexLoadedPages: pages loaded straight into a store on
// which no runner ever ran (so no observed set is published) are indexed
// when observers start later.
func TestObserversIndexLoadedPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if tables, err := admin.ObservedTables(ctx, e.st); err != nil || len(tables) != 0 {
		t.Fatalf("observed tables published: %v %v", tables, err)
	}
	feed := `{"url":"http://x.example/","html":"<title>X</title><p>zebra shared</p><a href=\"http://y.example/\">why</a>"}
{"url":"http://y.example/","html":"<title>Y</title><p>yak</p>"}
{"url":"http://z.example/","html":"<title>Z</title><p>zebra shared</p>"}
`
	if s, _ := e.load(input.JSONL("feed", strings.NewReader(feed), input.Options{}), loader.Options{}); s.Loaded != 3 {
		t.Fatalf("%+v", s)
	}

	// A runner starts.
	reg := framework.NewRegistry()
	if err := webindex.Register(reg); err != nil {
		t.Fatal(err)
	}
	fw, err := frameworktest.Start(ctx, reg, &frameworktest.Options{Store: e.st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := fw.WaitForObservers(waitCtx); err != nil {
		t.Fatal(err)
	}
	db := fw.DB()
	total, res, err := e.ix.Search(ctx, db, "zebra", 10)
	// z's text is the shorter, so more about zebras.
	if err != nil || total != 2 || res[0].URL != "http://z.example/" || res[1].URL != "http://x.example/" {
		t.Fatalf("search: %d %+v %v", total, res, err)
	}
	pv, err := e.ix.Page(ctx, db, "http://y.example/")
	if err != nil || len(pv.Inlinks) != 1 || pv.Inlinks[0].Source != "http://x.example/" {
		t.Fatalf("page view %+v %v", pv, err)
	}
}

func TestNewRefusesUnobservedDB(t *testing.T) {
	e := newEnv(t)
	// A DB that knows of other observers only.
	db, err := framework.Open(context.Background(), e.st, e.ts, &framework.Options{Observers: framework.NewRegistry(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loader.New(db, loader.Options{}); !errors.Is(err, loader.ErrInvalidOptions) {
		t.Fatalf("New with a DB that notifies nobody: %v", err)
	}
	if _, err := loader.New(e.db, loader.Options{Concurrency: -1}); !errors.Is(err, loader.ErrInvalidOptions) {
		t.Fatalf("negative concurrency: %v", err)
	}
	o := loader.Options{}
	o.EnsureDefaults()
	if o.BatchSize != 32 || o.Concurrency != 4 || o.MaxBody != input.DefaultMaxBody || o.Validate() != nil {
		t.Fatalf("defaults %+v", o)
	}
}

// TestCancel: a run stopped midway reports the context's error and
// accounts for every record read.
func TestCancel(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := func(yield func(input.Record, error) bool) {
		for i := 0; ; i++ {
			if i == 200 {
				cancel()
			}
			u := "http://cancel.example/" + strings.Repeat("i", 1+i%50) + "/" + string(rune('a'+i/50%26))
			if !yield(input.Record{URL: u, Body: []byte(html(u)), Source: "inf", Offset: int64(i)}, nil) {
				return
			}
		}
	}
	s, _, err := e.tryLoad(ctx, src, loader.Options{BatchSize: 4})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if s.Read < 200 || s.OK() {
		t.Fatalf("summary %+v", s)
	}
	checkAccounting(t, s)
	// The transactions under way when the run was cancelled finished (and
	// left no locks for the reads below to wait out).
	if got := int64(len(e.pages())); got != s.Loaded {
		t.Errorf("%d pages stored, summary says %d loaded", got, s.Loaded)
	}
}
