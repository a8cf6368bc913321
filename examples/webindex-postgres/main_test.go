package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/internal/pgtest"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// TestQueriesTheExportedTable: on a table written the way runner -export
// postgres writes it (through export.PostgresSink), the query lists the
// canonical pages best-linked first, leaves out duplicates and deleted
// pages, and filters by title.
func TestQueriesTheExportedTable(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	sink, err := export.NewPostgresSink(ctx, srv.DSN(), export.PostgresOptions{Table: "webindex_export", Values: export.JSONB})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	row := func(url, title, canonical string, inbound int64) export.Entry {
		b, err := json.Marshal(schema.CanonicalRow{URL: url, Title: title, Canonical: canonical, InboundCount: inbound})
		if err != nil {
			t.Fatal(err)
		}
		return export.Entry{Key: []byte(url), Seq: 10, Value: b}
	}
	if err := sink.Export(ctx, "webindex", []export.Entry{
		row("http://a.example/", "Install guide", "http://a.example/", 7),
		row("http://b.example/", "Reference", "http://b.example/", 30),
		row("http://mirror.example/a", "Install guide", "http://a.example/", 7), // a duplicate of a
		row("http://c.example/", "Installing plugins", "http://c.example/", 2),
		{Key: []byte("http://gone.example/"), Seq: 11, Delete: true},
	}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"-dsn", srv.DSN()}, &out, &out); err != nil {
		t.Fatal(err)
	}
	want := "    30  http://b.example/  Reference\n     7  http://a.example/  Install guide\n     2  http://c.example/  Installing plugins\n"
	if out.String() != want {
		t.Errorf("the best-linked pages:\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	if err := run(ctx, []string{"-dsn", srv.DSN(), "-title", "INSTALL", "-limit", "1"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if want := "     7  http://a.example/  Install guide\n"; out.String() != want {
		t.Errorf("by title, one: %q, want %q", out.String(), want)
	}
}

// TestADatabaseThatDoesNotAnswer fails within -timeout naming the server.
func TestADatabaseThatDoesNotAnswer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // accept, never answer
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	dsn := "postgres://u@" + l.Addr().String() + "/db?sslmode=disable"
	err = run(context.Background(), []string{"-dsn", dsn, "-timeout", "300ms"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("a database that does not answer: %v; want an error naming %s", err, l.Addr())
	}
	t.Setenv("TRICKLE_EXPORT_DSN", "")
	if err := run(context.Background(), nil, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-dsn") {
		t.Errorf("no DSN: %v, want an error naming -dsn", err)
	}
}
