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

// A bulk run in a budget far smaller than its records spills them, and
// the index it computes, to disk in many sorted runs, and loads the last
// record of each URL as a run in a roomy budget does.
func TestBulkRunInATinyBudget(t *testing.T) {
	var recs []input.Record
	want := map[string]string{}
	for i := range 300 {
		u := fmt.Sprintf("http://site%d.example/p%d", i%7, i)
		title := fmt.Sprintf("P%d", i)
		body := fmt.Sprintf("<title>%s</title><p>%s</p><a href=\"/p%d\">next</a>", title, strings.Repeat(fmt.Sprintf("word%d ", i%13), 200), i+1)
		recs = append(recs, put(u, body))
		want[u] = title
		if i%10 == 0 {
			recs = append(recs, put(u, html("superseded")))
			recs = append(recs, put(u, body))
		}
	}
	tiny, roomy := newEnv(t), newEnv(t)
	for _, c := range []struct {
		e      *env
		memory int64
	}{{tiny, 256 << 10}, {roomy, 0}} {
		l, err := loader.New(c.e.db, loader.Options{Bulk: true, BulkMemory: c.memory, BulkTempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Run(context.Background(), records(recs...))
		if err != nil {
			t.Fatal(err)
		}
		if s.Loaded != 300 || s.Superseded != 60 {
			t.Fatalf("budget %d: %+v", c.memory, s)
		}
		switch sp := l.BulkProgress().Spills; {
		case c.memory != 0 && sp < 10:
			t.Errorf("budget %d: %d runs spilled, want many", c.memory, sp)
		case c.memory == 0 && sp != 0:
			t.Errorf("default budget: %d runs spilled, want none", sp)
		}
		c.e.wantPages(want)
	}
}

// The default budget is a quarter of the memory the process may use, at
// most 2 GiB, and never too little to load with.
func TestDefaultBulkMemory(t *testing.T) {
	if n := loader.DefaultBulkMemory(); n < 64<<20 || n > 2<<30 {
		t.Fatalf("DefaultBulkMemory() = %d, want 64 MiB to 2 GiB on any machine that runs the tests", n)
	}
	o := (&loader.Options{}).EnsureDefaults()
	if o.BulkMemory != loader.DefaultBulkMemory() {
		t.Fatalf("EnsureDefaults set BulkMemory %d, want %d", o.BulkMemory, loader.DefaultBulkMemory())
	}
	o.BulkMemory = 1000
	if err := o.Validate(); !errors.Is(err, loader.ErrInvalidOptions) {
		t.Fatalf("BulkMemory 1000: %v", err)
	}
}
