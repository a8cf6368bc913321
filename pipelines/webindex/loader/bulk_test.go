package loader_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/store"
)

// A bulk run imports the last record of each URL into an empty index,
// reporting bad records as a normal run does, and leaves no notification:
// the index is complete when it returns. A second one is refused.
func TestBulkRun(t *testing.T) {
	e := newEnv(t)
	src := records(
		put("http://a.example/", html("A0")),
		put("http://a.example/", html("A")),
		put("http://b.example/", html("B")),
		put("http://gone.example/", html("Gone")),
		del("http://gone.example/"),
		put("ftp://bad.example/", html("Bad")),
	)
	s, ps := e.load(src, loader.Options{Bulk: true})
	if s.Read != 6 || s.Loaded != 2 || s.Bad != 1 || s.Superseded != 2 {
		t.Fatalf("bulk run: %+v", s)
	}
	if len(ps) != 1 || ps[0].Kind != loader.BadRecord {
		t.Errorf("problems %v", ps)
	}
	e.wantPages(map[string]string{"http://a.example/": "A", "http://b.example/": "B"})
	if n := e.pending(); n != 0 {
		t.Errorf("%d pending notifications after a bulk run, want 0", n)
	}
	_, _, err := e.tryLoad(context.Background(), records(put("http://c.example/", html("C"))), loader.Options{Bulk: true})
	if !errors.Is(err, webindex.ErrNotEmpty) {
		t.Fatalf("bulk run into a loaded index: %v", err)
	}
	if _, err := loader.New(e.db, loader.Options{BulkResume: true}); !errors.Is(err, loader.ErrInvalidOptions) {
		t.Fatalf("BulkResume without Bulk: %v", err)
	}
	s, _ = e.load(records(put("http://c.example/", html("C"))), loader.Options{})
	if s.Loaded != 1 {
		t.Fatalf("a normal run after the bulk one: %+v", s)
	}
}

// A bulk run loads the last record of each URL, and reports a page that
// fails to parse only if it is its URL's last record: an earlier one,
// superseded, is dropped either way.
func TestBulkRunKeepsTheLastRecordOfEachURL(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x", 2048) // over MaxBody: fails to parse
	recs := []input.Record{
		put("http://a.example/", big), put("http://a.example/", html("A")),
		put("http://b.example/", html("B")), put("http://b.example/", big),
	}
	for i := range 40 {
		recs = append(recs, put("http://c.example/", html(fmt.Sprint("C", i))))
	}
	s, ps := e.load(records(recs...), loader.Options{Bulk: true, MaxBody: 1024, Concurrency: 4})
	if s.Loaded != 2 || s.Bad != 1 || s.Superseded != 41 {
		t.Fatalf("bulk run: %+v", s.Counts)
	}
	if len(ps) != 1 || ps[0].Kind != loader.BadRecord || ps[0].URL != "http://b.example/" {
		t.Errorf("problems %v, want one bad record, b's last", ps)
	}
	e.wantPages(map[string]string{"http://a.example/": "A", "http://c.example/": "C39"})
}

// ingestWatch is a pebble store that calls before on every Ingest.
type ingestWatch struct {
	*store.DB
	before func()
}

func (w *ingestWatch) Ingest(ctx context.Context, txns []*store.RowTxn) error {
	w.before()
	return w.DB.Ingest(ctx, txns)
}

// A bulk run reports its phase as it goes: idle before it starts, reading
// while its sources yield, importing while the store ingests (after every
// page is parsed), and done at the end, with the pages parsed and
// imported.
func TestBulkRunProgress(t *testing.T) {
	base := newEnv(t)
	var l *loader.Loader
	var reading, importing []loader.BulkStatus
	watch := &ingestWatch{DB: base.st.(*store.DB), before: func() { importing = append(importing, l.BulkProgress()) }}
	e := newEnvOn(t, watch, base.ts)
	l, err := loader.New(e.db, loader.Options{Bulk: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := l.BulkProgress(); st != (loader.BulkStatus{}) || st.Phase != loader.BulkIdle {
		t.Fatalf("before the run: %+v", st)
	}
	src := func(yield func(input.Record, error) bool) {
		for rec, err := range records(put("http://a.example/", html("A")), put("http://b.example/", html("B")), put("ftp://bad.example/", html("Bad"))) {
			reading = append(reading, l.BulkProgress())
			if !yield(rec, err) {
				return
			}
		}
	}
	if _, err := l.Run(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	if len(reading) != 3 || len(importing) == 0 {
		t.Fatalf("%d statuses while reading, %d while ingesting: want 3 and some", len(reading), len(importing))
	}
	for i, st := range reading {
		if st.Phase != loader.BulkReading {
			t.Errorf("while reading record %d: %+v", i, st)
		}
	}
	want := loader.BulkStatus{Phase: loader.BulkImporting, Parsed: 2, ToParse: 2, Pages: 2}
	for _, st := range importing {
		if st != want {
			t.Errorf("while ingesting: %+v, want %+v", st, want)
		}
	}
	want.Phase = loader.BulkDone
	if got := l.BulkProgress(); got != want {
		t.Fatalf("after the run: %+v, want %+v", got, want)
	}
}

// A bulk run whose pages exceed BulkMaxBytes stops while reading, before
// writing anything, with an error naming the cap; the index stays empty,
// so a bulk run within the cap then loads it. A URL read again replaces
// its earlier body in the count instead of adding to it.
func TestBulkRunRefusesMorePagesThanItsMemoryCap(t *testing.T) {
	e := newEnv(t)
	page := html("A")
	limit := int64(2*len(page) + len(page)/2) // two pages fit, three do not
	again := records(
		put("http://a.example/", page), put("http://a.example/", page), put("http://a.example/", page),
		put("http://b.example/", page),
	)
	three := records(put("http://a.example/", page), put("http://b.example/", page), put("http://c.example/", page))
	_, _, err := e.tryLoad(context.Background(), three, loader.Options{Bulk: true, BulkMaxBytes: limit})
	if !errors.Is(err, loader.ErrBulkTooLarge) || !strings.Contains(err.Error(), "-bulk-max-bytes") || !strings.Contains(err.Error(), "http://c.example/") {
		t.Fatalf("bulk run past the cap: %v; want ErrBulkTooLarge naming the flag and the page it stopped at", err)
	}
	e.wantPages(map[string]string{})
	s, _ := e.load(again, loader.Options{Bulk: true, BulkMaxBytes: limit})
	if s.Loaded != 2 {
		t.Fatalf("bulk run within the cap after the refused one: %+v", s)
	}
	e.wantPages(map[string]string{"http://a.example/": "A", "http://b.example/": "A"})
}

// The default cap is the memory the process may use over the measured
// peak per byte of page, which is never nothing.
func TestDefaultBulkMaxBytes(t *testing.T) {
	if n := loader.DefaultBulkMaxBytes(); n < 64<<20 {
		t.Fatalf("DefaultBulkMaxBytes() = %d, want at least 64 MiB on any machine that runs the tests", n)
	}
	o := (&loader.Options{}).EnsureDefaults()
	if o.BulkMaxBytes != loader.DefaultBulkMaxBytes() {
		t.Fatalf("EnsureDefaults set BulkMaxBytes %d, want %d", o.BulkMaxBytes, loader.DefaultBulkMaxBytes())
	}
}
