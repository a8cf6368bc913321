package input

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestJSONL(t *testing.T) {
	long := strings.Repeat("<p>é\"</p>", 1<<20/len("<p>é\"</p>")+1) // > 1 MiB decoded
	longJSON := fmt.Sprintf(`{"url":"http://long/","html":%q}`, long)
	lines := []string{
		`{"url":"http://a/","html":"<html>a</html>"}`, // 1
		``,                                  // 2 blank
		`   `,                               // 3 blank
		`{"url":"http://b/","delete":true}`, // 4
		`{not json`,                         // 5
		`{"html":"x"}`,                      // 6 missing url
		`{"url":"http://c/","html":"x","delete":true}`, // 7 both
		`{"url":"http://d/"}`,                          // 8 neither
		`{"url":"http://e/","delete":false}`,           // 9
		`[1,2]`,                                        // 10
		longJSON,                                       // 11
		`{"url":"http://f/","html":"f","extra":1}` + "\r", // 12, CRLF
		`{"url":"http://g/","html":"no newline at end"}`,  // 13
	}
	input := strings.Join(lines, "\n")
	var st Stats
	r := collect(t, JSONL("feed.jsonl", strings.NewReader(input), Options{Stats: &st}))
	if r.fatal != nil {
		t.Fatal(r.fatal)
	}
	want := []string{"rec:http://a/", "rec:http://b/", "bad", "bad", "bad", "bad", "bad", "bad", "rec:http://long/", "rec:http://f/", "rec:http://g/"}
	if !slices.Equal(r.order, want) {
		t.Fatalf("order %q, want %q; bad %v", r.order, want, r.bad)
	}
	wantBad := []struct {
		line int
		sub  string
	}{{5, "invalid JSON"}, {6, "missing url"}, {7, "both"}, {8, "neither"}, {9, "must be true"}, {10, "invalid JSON"}}
	for i, w := range wantBad {
		b := r.bad[i]
		if b.Line != w.line || !strings.Contains(b.Error(), w.sub) || !strings.Contains(b.Error(), fmt.Sprintf("feed.jsonl: line %d:", w.line)) {
			t.Errorf("bad[%d] = %v (line %d), want line %d %q", i, b, b.Line, w.line, w.sub)
		}
	}
	recLines := []int{1, 4, 11, 12, 13}
	offset := 0
	offsets := map[int]int{}
	for i, l := range lines {
		offsets[i+1] = offset
		offset += len(l) + 1
	}
	for i, rec := range r.recs {
		if rec.Line != recLines[i] || rec.Offset != int64(offsets[rec.Line]) || rec.Source != "feed.jsonl" {
			t.Errorf("record %d: line %d offset %d", i, rec.Line, rec.Offset)
		}
	}
	if string(r.recs[0].Body) != "<html>a</html>" || !r.recs[1].Delete || r.recs[1].Body != nil {
		t.Errorf("records %+v", r.recs[:2])
	}
	if string(r.recs[2].Body) != long {
		t.Errorf("long line body mismatch (%d bytes)", len(r.recs[2].Body))
	}
	if st.Records != 5 || st.Deletes != 1 || st.Bad != 6 {
		t.Errorf("stats %+v", st)
	}
}

func TestJSONLTooLong(t *testing.T) {
	huge := fmt.Sprintf(`{"url":"http://huge/","html":"%s"}`, strings.Repeat("x", 200<<10))
	bigBody := fmt.Sprintf(`{"url":"http://big/","html":"%s"}`, strings.Repeat("y", 2000))
	input := strings.Join([]string{huge, `{"url":"http://ok/","html":"ok"}`, bigBody, `{"url":"http://ok2/","delete":true}`}, "\n")
	r := collect(t, JSONL("x", strings.NewReader(input), Options{MaxBody: 1000}))
	if !slices.Equal(r.order, []string{"bad", "rec:http://ok/", "bad", "rec:http://ok2/"}) {
		t.Fatalf("order %q", r.order)
	}
	if !errors.Is(r.bad[0], ErrTooLarge) || r.bad[0].Line != 1 || !strings.Contains(r.bad[0].Error(), "too large") {
		t.Errorf("bad[0] = %v", r.bad[0])
	}
	if !errors.Is(r.bad[1], ErrTooLarge) || r.bad[1].Line != 3 {
		t.Errorf("bad[1] = %v", r.bad[1])
	}
	if r.recs[0].Line != 2 || r.recs[0].Offset != int64(len(huge)+1) {
		t.Errorf("record after long line: %+v", r.recs[0])
	}
}

func TestJSONLGzipAndReadError(t *testing.T) {
	r := collect(t, JSONL("z", strings.NewReader(string(gz([]byte(`{"url":"http://z/","html":"z"}`+"\n")))), Options{}))
	if len(r.recs) != 1 || string(r.recs[0].Body) != "z" {
		t.Errorf("gzip jsonl: %q", r.order)
	}
	data := gz([]byte(`{"url":"http://z/","html":"z"}` + "\n" + strings.Repeat(`{"url":"http://y/","html":"y"}`+"\n", 1000)))
	r = collect(t, JSONL("cut.jsonl.gz", strings.NewReader(string(data[:len(data)-10])), Options{}))
	if r.fatal == nil || !strings.Contains(r.fatal.Error(), "cut.jsonl.gz: line ") || len(r.recs) == 0 {
		t.Errorf("truncated gzip jsonl: %d records, fatal %v", len(r.recs), r.fatal)
	}
}
