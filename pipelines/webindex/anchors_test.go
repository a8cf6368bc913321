package webindex_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// TestAllAnchorsKept: every anchor text of a source's links to a target
// is an inlink's anchors; changing only a second anchor updates it; the
// index equals the batch computation throughout; an inlink cell in the old
// format (the anchor's text) still reads.
func TestAllAnchorsKept(t *testing.T) {
	e := indextest.New(t)
	ctx := context.Background()
	const src, dst = "http://src.example/", "http://dst.example/"
	c := &indextest.Corpus{Pages: map[string]string{
		src:                     `<title>S</title>s <a href="/x">ignored</a><a href="http://dst.example/">Install</a> <a href="http://dst.example/"><img></a> <a href="http://dst.example/">Download</a> <a href="http://dst.example/">Install</a>`,
		dst:                     `<title>D</title>d`,
		"http://other.example/": `<title>O</title>o <a href="http://dst.example/"><img></a>`,
		"http://mark.example/":  "<title>M</title>m <a href=\"http://dst.example/\">\xff</a>",
	}}
	e.Load(c.Pages)
	e.Settle()
	urls := []string{src, dst, "http://other.example/", "http://mark.example/"}
	check := func(step string, want map[string][]string) {
		t.Helper()
		_, diffs, err := e.Index.Verify(ctx, e.DB, c.Expected(t), urls, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range diffs {
			t.Errorf("%s: %s", step, d)
		}
		p, err := e.Index.Inlinks(ctx, e.DB, dst, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, l := range p.Links {
			got[l.Source] = l.Anchors
			if len(l.Anchors) > 0 && l.Anchor != l.Anchors[0] || len(l.Anchors) == 0 && l.Anchor != "" {
				t.Errorf("%s: inlink %+v: Anchor is not the first of Anchors", step, l)
			}
		}
		for s, w := range want {
			if !slices.Equal(got[s], w) {
				t.Errorf("%s: anchors from %s = %q, want %q", step, s, got[s], w)
			}
		}
	}
	check("load", map[string][]string{src: {"Install", "Download"}, "http://other.example/": {}, "http://mark.example/": {"\xff"}}) // an anchor starting with the list mark

	c.Pages[src] = strings.Replace(c.Pages[src], "Download", "Get started", 1)
	e.Load(map[string]string{src: c.Pages[src]})
	e.Settle()
	check("second anchor changed", map[string][]string{src: {"Install", "Get started"}})

	// A store written before inlinks kept every anchor holds the one
	// anchor's text, as does a page indexed from a document of the first
	// encoding. The cell is written as the index writes it, with its guard
	// (the source's indexed document, written back as it is).
	legacy, err := framework.Open(ctx, e.Store, e.FW.Oracle(), &framework.Options{Observers: e.Registry, Logger: indextest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	err = legacy.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		indexed := framework.Column{Family: "page", Qualifier: "indexed"}
		doc, err := tx.Get(ctx, schema.PagesTable, []byte("http://other.example/"), indexed)
		if err != nil {
			return err
		}
		if err := tx.Set(schema.PagesTable, []byte("http://other.example/"), indexed, doc); err != nil {
			return err
		}
		return tx.Set(schema.PagesTable, []byte(dst), framework.Column{Family: "in", Qualifier: "http://other.example/"}, []byte("old anchor"))
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Index.Inlinks(ctx, e.DB, dst, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range p.Links {
		if l.Source == "http://other.example/" && (l.Anchor != "old anchor" || !slices.Equal(l.Anchors, []string{"old anchor"})) {
			t.Errorf("old-format inlink read as %+v", l)
		}
	}
	pg, err := extract.Parse(src, strings.NewReader(c.Pages[src]), 1<<20)
	if err != nil || len(pg.MoreAnchors) != 1 {
		t.Fatalf("parse: %+v %v", pg, err)
	}
}
