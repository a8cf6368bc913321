package sample

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// jsonLine is one line of the loader's JSON Lines input.
type jsonLine struct {
	URL    string  `json:"url"`
	HTML   *string `json:"html,omitempty"`
	Delete bool    `json:"delete,omitempty"`
}

// WriteJSONL writes every loaded page to w as a JSON line
// {"url":…,"html":…}, in URL order: the loader's --jsonl input.
func (c *Corpus) WriteJSONL(w io.Writer) error {
	var changes []Change
	for d := range c.All() {
		changes = append(changes, Change{Op: Add, URL: d.URL, HTML: d.HTML})
	}
	return WriteChanges(w, changes)
}

// WriteChanges writes changes to w as JSON lines, in order: {"url":…,
// "html":…} for Put and Add, {"url":…,"delete":true} for Delete.
func WriteChanges(w io.Writer, changes []Change) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, ch := range changes {
		line := jsonLine{URL: ch.URL, Delete: ch.Op == Delete}
		if !line.Delete {
			body := string(ch.HTML)
			line.HTML = &body
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteDir writes every loaded page as a file under dir, creating
// directories as needed, such that the loader's --dir mode with --base-url
// c.BaseURL() loads exactly the corpus' URLs: page base-url + "site0/s1/x.html"
// is file dir/site0/s1/x.html. Only corpora in the directory layout
// (Options.BaseURL set) can be written. Files already in dir are neither
// removed nor checked, so dir should be new or empty.
func (c *Corpus) WriteDir(dir string) error {
	if c.base == "" {
		return errors.New("sample: WriteDir needs the directory layout (Options.BaseURL)")
	}
	prefix := c.base + "/"
	for d := range c.All() {
		rel, ok := strings.CutPrefix(d.URL, prefix)
		if !ok || !fileName(rel) {
			return fmt.Errorf("sample: %s does not map to a file under %s", d.URL, prefix)
		}
		path := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, d.HTML, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// fileName reports whether the slash-separated path rel names an .html or
// .htm file whose segments need no percent-encoding, so that the loader's
// URL for it is prefix + rel.
func fileName(rel string) bool {
	if !strings.HasSuffix(rel, ".html") && !strings.HasSuffix(rel, ".htm") {
		return false
	}
	for _, s := range strings.Split(rel, "/") {
		if s == "" || s == "." || s == ".." || url.PathEscape(s) != s {
			return false
		}
	}
	return true
}
