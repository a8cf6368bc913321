package sample

import (
	"bytes"
	"maps"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/loader/input"
)

// loaded returns the loaded pages as the loader would receive them.
func loaded(c *Corpus) map[string][]byte {
	m := map[string][]byte{}
	for d := range c.All() {
		m[d.URL] = d.HTML
	}
	return m
}

func TestWriteJSONL(t *testing.T) {
	c := Generate(2, 300)
	var buf bytes.Buffer
	if err := c.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for rec, err := range input.JSONL("corpus.jsonl", &buf, input.Options{}) {
		if err != nil {
			t.Fatal(err)
		}
		got[rec.URL] = rec.Body
	}
	if !maps.EqualFunc(got, loaded(c), bytes.Equal) {
		t.Errorf("JSONL round trip: %d pages, want %d", len(got), c.Len())
	}

	changes := c.Step(1, 0.2)
	buf.Reset()
	if err := WriteChanges(&buf, changes); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`,"delete":true}`)) || bytes.Contains(buf.Bytes(), []byte(`\u003c`)) {
		t.Errorf("unexpected encoding:\n%.500s", buf.Bytes())
	}
	i := 0
	for rec, err := range input.JSONL("changes.jsonl", &buf, input.Options{}) {
		if err != nil {
			t.Fatal(err)
		}
		ch := changes[i]
		if rec.URL != ch.URL || rec.Delete != (ch.Op == Delete) || !bytes.Equal(rec.Body, ch.HTML) {
			t.Errorf("line %d: %s %v, want %s %v", i+1, rec.URL, rec.Delete, ch.URL, ch.Op)
		}
		i++
	}
	if i != len(changes) {
		t.Errorf("read %d changes, want %d", i, len(changes))
	}
}

func TestWriteDir(t *testing.T) {
	c, err := New(Options{Pages: 400, Seed: 2, BaseURL: "http://site.example"})
	if err != nil {
		t.Fatal(err)
	}
	c.Step(1, 0.2) // adds /new/ pages
	dir := t.TempDir()
	if err := c.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	var htm, mirror, draft, added int
	for rec, err := range input.Dir(dir, c.BaseURL(), input.Options{}) {
		if err != nil {
			t.Fatal(err)
		}
		got[rec.URL] = rec.Body
		switch {
		case strings.HasSuffix(rec.URL, ".htm"):
			htm++
		case strings.Contains(rec.URL, "/mirror"):
			mirror++
		case strings.Contains(rec.URL, "/draft/"):
			draft++
		case strings.Contains(rec.URL, "/new/"):
			added++
		}
	}
	if !maps.EqualFunc(got, loaded(c), bytes.Equal) {
		t.Errorf("Dir round trip: %d pages, want %d", len(got), c.Len())
	}
	if htm == 0 || mirror == 0 || draft == 0 || added == 0 {
		t.Errorf("layout lacks variety: %d .htm, %d mirror, %d draft, %d new", htm, mirror, draft, added)
	}

	if err := Generate(1, 10).WriteDir(t.TempDir()); err == nil {
		t.Error("WriteDir of the host layout succeeded")
	}
}

func TestNewErrors(t *testing.T) {
	for _, o := range []Options{
		{Pages: -1},
		{Pages: 10, Hosts: -1},
		{Pages: 10, DupFraction: 0.4, NearDupFraction: 0.2},
		{Pages: 10, BaseURL: "ftp://x/"},
		{Pages: 10, BaseURL: "http://x/?q"},
		{Pages: 10, BaseURL: "/relative"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}
