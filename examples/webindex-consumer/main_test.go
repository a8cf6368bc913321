package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/runner"
)

// The consumer rebuilds the table from what a runner's export published:
// the latest row of each page, deleted pages gone, a re-delivered older
// row ignored.
func TestConsumerRebuildsTheTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := runner.Start(ctx, runner.Config{Deployment: runner.Deployment{DataDir: dir, NATSPort: -1, Logger: quiet}, HTTPAddr: "off"}, framework.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sink, err := export.NewJetStreamSink(ctx, r.Node().Conn(), export.JetStreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	row := func(url, canonical string, seq uint64) export.Entry {
		v, _ := json.Marshal(webindex.CanonicalRow{URL: url, Title: "T " + url, Canonical: canonical, InboundCount: int64(seq), Rank: 1})
		return export.Entry{Key: []byte(url), Seq: seq, Value: v}
	}
	for _, batch := range [][]export.Entry{
		{row("http://a.example/", "http://a.example/", 10), row("http://b.example/", "http://a.example/", 11)},
		{row("http://a.example/", "http://a.example/", 20), {Key: []byte("http://b.example/"), Seq: 21, Delete: true}},
		{row("http://a.example/", "http://a.example/", 10), row("http://c.example/", "http://c.example/", 22)}, // a late re-delivery, and c
	} {
		if err := sink.Export(ctx, "webindex", batch); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	var summary bytes.Buffer
	if err := run(ctx, []string{"-data", dir}, &out, &summary); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var got []webindex.CanonicalRow
	for _, l := range lines {
		var r webindex.CanonicalRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, r)
	}
	if len(got) != 2 || got[0].URL != "http://a.example/" || got[0].InboundCount != 20 || got[1].URL != "http://c.example/" {
		t.Fatalf("table %+v; want a (its row of sequence 20) and c", got)
	}
	// One message per page: the latest row of a and c, the tombstone of b.
	if !strings.Contains(summary.String(), "2 pages from 3 messages") {
		t.Errorf("summary %q", summary.String())
	}
}

// A consumer that cannot reach NATS says so within its connect timeout.
func TestConsumerFailsClearly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	err := run(ctx, []string{"-nats", "nats://127.0.0.1:1", "-connect-timeout", "500ms"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("err = %v, want one naming the URL", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("failing took %v", d)
	}
}
