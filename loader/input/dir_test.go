package input

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
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

// Contract: the URL Dir gives a file is, once normalized as the loader does,
// the URL that links to the file resolve to however they spell its name.
func TestDirURLsMatchLinks(t *testing.T) {
	files := []struct {
		name  string   // on disk, in directory "cpp"
		links []string // hrefs from cpp/index.html that reach it
	}{
		{"operator=.html", []string{"operator=.html", "operator%3D.html", "operator%3d.html"}},
		{"operator().html", []string{"operator().html", "operator%28%29.html"}},
		{"operator+.html", []string{"operator+.html", "operator%2B.html"}},
		{"a b.html", []string{"a%20b.html", "a b.html"}},
		{"é.html", []string{"%C3%A9.html", "%c3%a9.html", "é.html"}},
		{"\xff.html", []string{"%FF.html", "%ff.html"}},
		{"100%.html", []string{"100%25.html"}},
		{"a%3D.html", []string{"a%253D.html"}},
		{"q?.html", []string{"q%3F.html", "q%3f.html"}},
		{"h#.html", []string{"h%23.html"}},
		{"[x];y.html", []string{"%5Bx%5D;y.html", "[x]%3By.html"}},
	}
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "cpp", "index.html"), "index")
	for _, f := range files {
		writeFile(t, filepath.Join(root, "cpp", f.name), f.name)
	}
	r := collect(t, Dir(root, "http://Docs.example/ref", Options{}))
	if r.fatal != nil || len(r.bad) != 0 {
		t.Fatalf("fatal %v, bad %v", r.fatal, r.bad)
	}
	byBody := map[string]string{} // file name -> normalized URL
	for _, rec := range r.recs {
		n, err := extract.Normalize(rec.URL)
		if err != nil {
			t.Fatalf("record URL %q: %v", rec.URL, err)
		}
		byBody[string(rec.Body)] = n
	}
	base, err := url.Parse(byBody["index"])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, f := range files {
		got, ok := byBody[f.name]
		if !ok {
			t.Fatalf("no record for %q", f.name)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q both have URL %q", f.name, other, got)
		}
		seen[got] = f.name
		for _, href := range f.links {
			want, ok := extract.Resolve(base, href)
			if !ok {
				t.Fatalf("Resolve(%q) failed", href)
			}
			if got != want {
				t.Errorf("file %q has URL %q; link %q resolves to %q", f.name, got, href, want)
			}
		}
	}
}
