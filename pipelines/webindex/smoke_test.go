package webindex_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
)

func TestSmallCorpus(t *testing.T) {
	e := indextest.New(t)
	ctx := context.Background()
	e.Load(map[string]string{
		"http://a.example/":  `<title>A</title><p>alpha shared</p><a href="http://c.example/">to c</a><a href="/x">x</a>`,
		"http://b.example/":  `<title>B</title><p>beta</p><a href="http://c.example/">see c</a><a href="http://d.example/">d</a>`,
		"http://c.example/":  `<title>C</title><p>gamma shared</p><a href="http://d.example/">dup link</a>`,
		"http://d.example/":  `<title>C</title><p>gamma shared</p><a href="http://c.example/">dup link</a>`,
		"http://dd.example/": `<title>C</title><p>gamma shared</p><a href="http://zz.example/">dup link</a>`,
	})
	e.Settle()
	pv, err := e.Index.Page(ctx, e.DB, "http://D.example:80/#frag")
	if err != nil {
		t.Fatal(err)
	}
	// c has rank 3 (a, b, d), d has 2 (b, c): c is canonical. Inlinks
	// from outside the cluster: a→c, b→c, b→d; c→d and d→c are inside.
	if pv.Canonical != "http://c.example/" || pv.InboundCount != 2 || len(pv.Inlinks) != 3 || pv.Rank != 2 {
		t.Fatalf("page view %+v", pv)
	}
	if !slices.Equal(pv.Duplicates, []string{"http://c.example/", "http://dd.example/"}) {
		t.Fatalf("duplicates %v", pv.Duplicates)
	}
	total, res, err := e.Index.Search(ctx, e.DB, "Shared", 10)
	if err != nil || total != 2 || res[0].URL != "http://c.example/" || res[0].InboundCount != 2 || res[1].URL != "http://a.example/" {
		t.Fatalf("search: %d %+v %v", total, res, err)
	}
	top, err := e.Index.Top(ctx, e.DB, 10)
	if err != nil || len(top) != 3 || top[0].URL != "http://c.example/" || top[0].Title != "C" {
		t.Fatalf("top: %+v %v", top, err)
	}

	// Delete c: d (rank 1) becomes canonical; b's links still count.
	e.Load(map[string]string{"http://c.example/": ""}) // a delete
	e.Settle()
	pv, err = e.Index.Page(ctx, e.DB, "http://dd.example/")
	if err != nil || pv.Canonical != "http://d.example/" || pv.InboundCount != 1 {
		t.Fatalf("after delete: %+v %v", pv, err)
	}
	if _, err := e.Index.Page(ctx, e.DB, "http://c.example/"); !errors.Is(err, query.ErrPageNotFound) {
		t.Fatalf("deleted page: %v", err)
	}
}
