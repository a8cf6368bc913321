package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
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
		v, _ := json.Marshal(schema.CanonicalRow{URL: url, Title: "T " + url, Canonical: canonical, InboundCount: int64(seq), Rank: 1})
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
	var got []schema.CanonicalRow
	for _, l := range lines {
		var r schema.CanonicalRow
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

// With -follow, the consumer prints the table once it caught up with the
// stream, then each change as it comes: a page's new row, a deleted
// page's tombstone.
func TestConsumerFollows(t *testing.T) {
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
	row := func(url string, seq uint64) export.Entry {
		v, _ := json.Marshal(schema.CanonicalRow{URL: url, Title: "T", Canonical: url, InboundCount: int64(seq), Rank: 1})
		return export.Entry{Key: []byte(url), Seq: seq, Value: v}
	}
	if err := sink.Export(ctx, "webindex", []export.Entry{row("http://a.example/", 1), row("http://b.example/", 2)}); err != nil {
		t.Fatal(err)
	}
	out, summary := &lockedBuffer{}, &lockedBuffer{}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(fctx, []string{"-data", dir, "-follow"}, out, summary) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); {
			if time.Now().After(deadline) {
				t.Fatalf("no %s: output %q, summary %q", what, out.String(), summary.String())
			}
			time.Sleep(10 * time.Millisecond) // polling for the consumer's output
		}
	}
	waitFor("table", func() bool { return strings.Contains(summary.String(), "2 pages from 2 messages") })
	if err := sink.Export(ctx, "webindex", []export.Entry{row("http://a.example/", 3), {Key: []byte("http://b.example/"), Seq: 4, Delete: true}}); err != nil {
		t.Fatal(err)
	}
	waitFor("changes", func() bool { return strings.Count(out.String(), "\n") == 4 })
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.Contains(lines[2], `"inbound_count":3`) || lines[3] != `{"url":"http://b.example/","deleted":true}` {
		t.Fatalf("changes %q, want a's new row and b's deletion", lines[2:])
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// lockedBuffer is a buffer written by the consumer and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
