package loader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/store"
)

// TestBrokenInputs loads inputs with one broken record of every kind
// between good ones: each broken record is reported with its file and
// offset or line and counted, and every good record, before and after it,
// is loaded.
func TestBrokenInputs(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	const maxBody = 2048
	good := func(i int) string { return fmt.Sprintf("http://good%d.example/", i) }
	title := func(i int) string { return fmt.Sprintf("G%d", i) }

	// A WARC file: a bad header, a binary body, an oversized page and an
	// invalid URL between good responses.
	parts := [][]byte{
		htmlResp(good(1), title(1)),
		[]byte("this is not a WARC record\r\n"),
		htmlResp(good(2), title(2)),
		warcRec("response", "http://binary.example/", httpResp(200, "text/html", "\x00\x01\x02\x03 binary")),
		warcRec("response", "http://huge.example/", httpResp(200, "text/html", strings.Repeat("<p>x</p>", 500))),
		htmlResp("mailto:someone@example.com", "M"),
		htmlResp(good(3), title(3)),
	}
	offsets := make([]int64, len(parts))
	for i := 1; i < len(parts); i++ {
		offsets[i] = offsets[i-1] + int64(len(parts[i-1]))
	}
	mixed := writeFile(t, filepath.Join(dir, "mixed.warc"), bytes.Join(parts, nil))

	// A gzip WARC cut short in its second record.
	second := gz(htmlResp(good(5), title(5)))
	cut := writeFile(t, filepath.Join(dir, "cut.warc.gz"), append(gz(htmlResp(good(4), title(4))), second[:len(second)-30]...))

	// JSON Lines: invalid JSON, an invalid URL, an oversized page, and a
	// deletion of a page the WARC file loaded.
	feed := writeFile(t, filepath.Join(dir, "feed.jsonl"), []byte(strings.Join([]string{
		fmt.Sprintf(`{"url":%q,"html":%q}`, good(6), html(title(6))),
		`{not json`,
		fmt.Sprintf(`{"url":%q,"html":%q}`, good(7), html(title(7))),
		`{"url":"not a url","html":"<p>x</p>"}`,
		fmt.Sprintf(`{"url":"http://huge2.example/","html":%q}`, strings.Repeat("y", 3000)),
		fmt.Sprintf(`{"url":%q,"delete":true}`, good(1)),
	}, "\n")+"\n"))

	// Records from a source that does not check sizes: the parser does.
	mem := records(put("http://huge3.example/", strings.Repeat("z", 3000)), put(good(8), html(title(8))))

	var st input.Stats
	opts := loader.Options{MaxBody: maxBody, Stats: &st, BatchSize: 1}
	io := input.Options{MaxBody: maxBody, Stats: &st}
	s, ps := e.load(loader.Concat(input.WARC(mixed, io), input.WARC(cut, io), input.File(feed, io), mem), opts)

	e.wantPages(map[string]string{good(2): "G2", good(3): "G3", good(4): "G4", good(6): "G6", good(7): "G7", good(8): "G8"})
	if s.Loaded != 7 || s.Deleted != 1 || s.Bad != 8 || s.InputErrors != 1 || s.Failed != 0 || s.OK() {
		t.Errorf("summary %+v", s)
	}
	checkAccounting(t, s)
	wantReasons := map[string]int64{loader.ReasonBadInput: 2, loader.ReasonNotHTML: 1, loader.ReasonTooLarge: 3, loader.ReasonInvalidURL: 2}
	for k, v := range wantReasons {
		if s.BadReasons[k] != v {
			t.Errorf("bad reasons %v, want %v", s.BadReasons, wantReasons)
			break
		}
	}

	type where struct {
		kind   loader.ProblemKind
		reason string
		source string
		offset int64
		line   int
	}
	wantList := []where{
		{loader.InputError, "", "", -1, 0},
		{loader.BadRecord, loader.ReasonBadInput, feed, -1, 2},
		{loader.BadRecord, loader.ReasonInvalidURL, feed, -1, 4},
		{loader.BadRecord, loader.ReasonTooLarge, feed, -1, 5},
		{loader.BadRecord, loader.ReasonTooLarge, "mem", 0, 0},
		{loader.BadRecord, loader.ReasonBadInput, mixed, offsets[1], 0},
		{loader.BadRecord, loader.ReasonNotHTML, mixed, offsets[3], 0},
		{loader.BadRecord, loader.ReasonTooLarge, mixed, offsets[4], 0},
		{loader.BadRecord, loader.ReasonInvalidURL, mixed, offsets[5], 0},
	}
	var want []where
	var wantPs []loader.Problem
	for _, w := range wantList {
		wantPs = append(wantPs, loader.Problem{Kind: w.kind, Reason: w.reason, Source: w.source, Offset: w.offset, Line: w.line})
	}
	sortProblems(wantPs)
	for _, p := range wantPs {
		want = append(want, where{p.Kind, p.Reason, p.Source, p.Offset, p.Line})
	}
	sortProblems(ps)
	if len(ps) != len(want) {
		t.Fatalf("%d problems, want %d: %v", len(ps), len(want), ps)
	}
	for i, p := range ps {
		w := want[i]
		got := where{p.Kind, p.Reason, p.Source, p.Offset, p.Line}
		if w.line > 0 {
			got.offset = -1 // JSONL: the line is what matters
		}
		if got != w {
			t.Errorf("problem %d: got %+v (%v), want %+v", i, got, &p, w)
		}
		if p.Err == nil {
			t.Errorf("problem %d has no error", i)
		}
	}
	if msg := ps[0].Err.Error(); !strings.Contains(msg, "cut.warc.gz") || !strings.Contains(msg, "offset") {
		t.Errorf("input error %q does not say where", msg)
	}
}

// poisonStore fails every write to one row of the pages table, as a store
// refusing a value would.
type poisonStore struct {
	store.Store
	row string
}

var errPoison = errors.New("injected write failure")

func (p poisonStore) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	if txn.Table == schema.PagesTable && string(txn.Row) == p.row {
		return store.RowResult{}, errPoison
	}
	return p.Store.Apply(ctx, txn)
}

// ApplyAll fails the whole call when one of its row transactions is on
// the poisoned row, as one request to a store refusing it would.
func (p poisonStore) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	for _, txn := range txns {
		if txn.Table == schema.PagesTable && string(txn.Row) == p.row {
			return nil, errPoison
		}
	}
	return p.Store.ApplyAll(ctx, txns)
}

// TestFailedBatchLosesOnlyItsBadRecord: a batch whose transaction fails
// for good is retried record by record; only the record that cannot be
// written fails, and it is reported with its URL and position.
func TestFailedBatchLosesOnlyItsBadRecord(t *testing.T) {
	base := newEnv(t)
	const poison = "http://poison.example/"
	e := newEnvOn(t, poisonStore{base.st, poison}, base.ts)
	var recs []input.Record
	want := map[string]string{}
	for i := range 10 {
		u := fmt.Sprintf("http://ok%d.example/", i)
		if i == 6 {
			u = poison
		} else {
			want[u] = u
		}
		recs = append(recs, put(u, html(u)))
	}
	s, ps := e.load(records(recs...), loader.Options{Concurrency: 1})
	if s.Loaded != 9 || s.Failed != 1 || s.OK() {
		t.Fatalf("summary %+v", s)
	}
	if len(ps) != 1 || ps[0].Kind != loader.Failed || ps[0].URL != poison || ps[0].Source != "mem" || ps[0].Offset != 6 || !errors.Is(ps[0].Err, errPoison) {
		t.Fatalf("problems %v", ps)
	}
	base.wantPages(want)
	checkAccounting(t, s)
}

// TestMisframedWARC loads a WARC file in which one record's Content-Length
// runs 500 bytes past its end, into the next record: that record is
// reported with its file and offset, and every page around it, the next
// one included, is loaded whole.
func TestMisframedWARC(t *testing.T) {
	var parts [][]byte
	want := map[string]string{}
	for i := range 5 {
		u := fmt.Sprintf("http://page%d.example/", i)
		title := fmt.Sprintf("Page %d", i)
		body := strings.Replace(html(title), "</title>", "</title>"+strings.Repeat("<p>Some text.</p>", 60), 1)
		parts = append(parts, warcRec("response", u, httpResp(200, "text/html", body)))
		if i != 2 {
			want[u] = title
		}
	}
	bad := parts[2]
	i := bytes.Index(bad, []byte("Content-Length: ")) + len("Content-Length: ")
	j := i + bytes.IndexByte(bad[i:], '\r')
	n, err := strconv.Atoi(string(bad[i:j]))
	if err != nil {
		t.Fatal(err)
	}
	parts[2] = slices.Concat(bad[:i], []byte(strconv.Itoa(n+500)), bad[j:])
	off := int64(len(parts[0]) + len(parts[1]))
	for name, data := range map[string][]byte{"plain.warc": bytes.Join(parts, nil), "whole.warc.gz": gz(bytes.Join(parts, nil))} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			path := writeFile(t, filepath.Join(t.TempDir(), name), data)
			var st input.Stats
			s, ps := e.load(input.WARC(path, input.Options{Stats: &st}), loader.Options{Stats: &st})
			if s.Loaded != 4 || s.Bad != 1 || s.Read != 5 || len(ps) != 1 {
				t.Fatalf("summary %+v, problems %v", s, ps)
			}
			p := ps[0]
			if p.Kind != loader.BadRecord || p.Reason != loader.ReasonBadInput || p.Source != path || p.Offset != off || !errors.Is(p.Err, input.ErrBadFraming) {
				t.Errorf("problem %+v (%v)", p, &p)
			}
			if msg := p.Err.Error(); !strings.Contains(msg, "runs past the record end") {
				t.Errorf("problem says %q", msg)
			}
			e.wantPages(want)
			checkAccounting(t, s)
		})
	}
}
