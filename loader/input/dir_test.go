package input

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDir(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "index.html"), "root")
	writeFile(t, filepath.Join(root, "a", "b", "deep.htm"), "deep")
	writeFile(t, filepath.Join(root, "a", "UPPER.HTM"), "upper")
	writeFile(t, filepath.Join(root, "a", "notes.txt"), "txt")
	writeFile(t, filepath.Join(root, "a", "style.css"), "css")
	writeFile(t, filepath.Join(root, "sp ace", "q?#x%.html"), "odd")
	writeFile(t, filepath.Join(root, "z.Html"), "mixed")
	if err := os.Symlink(filepath.Join(root, "index.html"), filepath.Join(root, "link.html")); err != nil {
		t.Skip("symlinks unsupported:", err)
	}
	if err := os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "linkdir")); err != nil {
		t.Fatal(err)
	}

	for _, base := range []string{"https://ex.com/site", "https://ex.com/site/", "https://ex.com/site//"} {
		var st Stats
		r := collect(t, Dir(root, base, Options{Stats: &st}))
		if r.fatal != nil {
			t.Fatal(r.fatal)
		}
		want := []string{
			"rec:https://ex.com/site/a/UPPER.HTM",
			"rec:https://ex.com/site/a/b/deep.htm",
			"rec:https://ex.com/site/index.html",
			"bad", // link.html
			"bad", // linkdir
			"rec:https://ex.com/site/sp%20ace/q%3F%23x%25.html",
			"rec:https://ex.com/site/z.Html",
		}
		if !slices.Equal(r.order, want) {
			t.Fatalf("base %q: order\n%q\nwant\n%q", base, r.order, want)
		}
		for _, b := range r.bad {
			if !errors.Is(b, ErrSymlinkSkipped) || !strings.Contains(b.Error(), "symlink skipped") || !strings.Contains(b.Error(), "link") {
				t.Errorf("bad %v, want symlink skipped", b)
			}
		}
		odd := r.recs[3]
		u, err := url.Parse(odd.URL)
		if err != nil || u.Path != "/site/sp ace/q?#x%.html" || u.RawQuery != "" || u.Fragment != "" {
			t.Errorf("escaped URL %q parses to %+v, %v", odd.URL, u, err)
		}
		if string(odd.Body) != "odd" || odd.Offset != -1 || odd.Source != filepath.Join(root, "sp ace", "q?#x%.html") {
			t.Errorf("record %+v", odd)
		}
		if st.Records != 5 || st.Bad != 2 || st.Skipped[SkipNonHTMLFile] != 2 {
			t.Errorf("stats %+v", st)
		}
	}
}

func TestDirErrors(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "big.html"), strings.Repeat("x", 200))
	writeFile(t, filepath.Join(root, "ok.html"), "ok")
	r := collect(t, Dir(root, "http://h", Options{MaxBody: 100}))
	if !slices.Equal(r.order, []string{"bad", "rec:http://h/ok.html"}) || !errors.Is(r.bad[0], ErrTooLarge) {
		t.Errorf("order %q bad %v", r.order, r.bad)
	}
	for _, base := range []string{"ftp://h/", "/relative", "http://h/?q=1", "http://h/#f", "http:///nohost", "::"} {
		r := collect(t, Dir(root, base, Options{}))
		if r.fatal == nil || len(r.order) != 1 {
			t.Errorf("base %q: want one fatal error, got %q", base, r.order)
		}
	}
	r = collect(t, Dir(filepath.Join(root, "missing"), "http://h", Options{}))
	if r.fatal == nil || !strings.Contains(r.fatal.Error(), "missing") {
		t.Errorf("missing root: %q %v", r.order, r.fatal)
	}
	r = collect(t, Dir(filepath.Join(root, "ok.html"), "http://h", Options{}))
	if r.fatal == nil || !strings.Contains(r.fatal.Error(), "not a directory") {
		t.Errorf("file root: %q %v", r.order, r.fatal)
	}
	// A symlinked root is followed.
	link := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink(root, link); err == nil {
		r = collect(t, Dir(link, "http://h", Options{}))
		if len(r.recs) != 2 || r.recs[1].URL != "http://h/ok.html" {
			t.Errorf("symlinked root: %q", r.order)
		}
	}
}
