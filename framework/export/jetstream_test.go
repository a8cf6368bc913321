package export_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework/export"
)

// startNATS starts an embedded NATS server with JetStream on a file
// store in a temporary directory, and connects to it.
func startNATS(t *testing.T) (*cluster.Embedded, *nats.Conn) {
	t.Helper()
	e, err := cluster.StartEmbedded(cluster.EmbeddedOptions{Port: -1, InsecureNoAuth: true, DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := nats.Connect(e.ClientURL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return e, nc
}

// readStream reads every message of the sink's stream into a table with
// Consume, and returns how many there were.
func readStream(t *testing.T, nc *nats.Conn, stream string) (*export.Table, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tab := export.NewTable()
	n, err := export.Consume(ctx, nc, export.ConsumeOptions{Stream: stream, Subject: "app.export", FetchWait: 2 * time.Second}, func(queue string, e export.Entry) error {
		if queue != "docs" {
			return fmt.Errorf("entry of queue %q", queue)
		}
		tab.Apply(e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab, n
}

// A queue drains through the JetStream sink, and a consumer reading the
// stream rebuilds the exported table from one message per key; an entry
// exported again, or an older one, changes nothing.
func TestJetStreamSinkCarriesTheQueue(t *testing.T) {
	_, nc := startNATS(t)
	ctx := context.Background()
	sink, err := export.NewJetStreamSink(ctx, nc, export.JetStreamOptions{Stream: "EXP", Subject: "app.export", Window: 4})
	if err != nil {
		t.Fatal(err)
	}
	q, env := start(t, export.Options{Name: "docs", Buckets: 3, BatchSize: 5}, sink, nil)
	want := map[string]string{}
	for i := range 30 {
		k, v := fmt.Sprintf("doc/%d with space", i%12), fmt.Sprintf("v%d", i)
		if i%7 == 6 {
			v = ""
		}
		if err := put(ctx, env.DB(), q, k, v); err != nil {
			t.Fatal(err)
		}
		if v == "" {
			delete(want, k)
		} else {
			want[k] = v
		}
	}
	wait(t, env)
	tab, n := readStream(t, nc, "EXP")
	equalTo(t, tab, want)
	if n != 12 {
		t.Fatalf("%d messages read for the 12 keys of 30 entries", n)
	}

	// An entry exported again (its batch failed after publishing, or its
	// process died before the deletion committed) is dropped by the
	// stream; an older one changes nothing.
	again := []export.Entry{{Key: []byte("doc/1 with space"), Seq: 1, Value: []byte("old")}, {Key: []byte("x"), Seq: 2, Delete: true}}
	for range 2 {
		if err := sink.Export(ctx, "docs", again); err != nil {
			t.Fatal(err)
		}
	}
	tab, n = readStream(t, nc, "EXP")
	equalTo(t, tab, want)
	if n != 13 || sink.Stale() != 3 {
		t.Fatalf("%d messages, %d stale after exporting a stale entry and a new tombstone twice; want 13 and 3",
			n, sink.Stale())
	}
}

// Messages decode to what was exported, binary keys included; foreign
// messages are refused naming the header.
func TestMessagesRoundTrip(t *testing.T) {
	for _, e := range []export.Entry{
		{Key: []byte("https://example.org/a b?c=%41"), Seq: 42, Value: []byte("v")},
		{Key: []byte{0, 1, 0xff, '%', '\n'}, Seq: 7, Delete: true},
		{Key: []byte("empty value"), Seq: 9, Value: []byte{}},
	} {
		m := export.Message("s.q", "q", e)
		queue, got, err := export.DecodeMessage(m.Header, m.Data)
		if err != nil || queue != "q" || string(got.Key) != string(e.Key) || got.Seq != e.Seq || got.Delete != e.Delete || string(got.Value) != string(e.Value) {
			t.Errorf("%v came back as %v in %q (%v)", e, got, queue, err)
		}
	}
	// The compacted form: the subject names the queue and the key, a
	// hashed one with the key in a header.
	for _, e := range []export.Entry{
		{Key: []byte("https://example.org/a b?c=%41"), Seq: 42, Value: []byte("v")},
		{Key: []byte(strings.Repeat("long key/", 40)), Seq: 8, Delete: true},
	} {
		tok, hashed := export.KeyToken(e.Key, 0)
		m := export.CompactMessage("app.export.q."+tok, e)
		if (m.Header.Get(export.HeaderKey) != "") != hashed || m.Header.Get(export.HeaderQueue) != "" {
			t.Errorf("%v: headers %v (hashed %v)", e, m.Header, hashed)
		}
		queue, got, err := export.DecodeSubjectMessage(m.Subject, m.Header, m.Data)
		if err != nil || queue != "q" || string(got.Key) != string(e.Key) || got.Seq != e.Seq || got.Delete != e.Delete || string(got.Value) != string(e.Value) {
			t.Errorf("%v came back as %v in %q (%v)", e, got, queue, err)
		}
	}
	if _, _, err := export.DecodeSubjectMessage("q", nats.Header{export.HeaderSeq: {"1"}}, nil); !errors.Is(err, export.ErrCorrupt) {
		t.Errorf("a subject without queue and key: %v", err)
	}
	m := export.Message("s.q", "q", export.Entry{Key: []byte("k"), Seq: 1})
	m.Header.Set(export.HeaderSeq, "x")
	if _, _, err := export.DecodeMessage(m.Header, nil); !errors.Is(err, export.ErrCorrupt) || !strings.Contains(err.Error(), export.HeaderSeq) {
		t.Errorf("bad sequence header: %v", err)
	}
	if _, _, err := export.DecodeMessage(nats.Header{}, nil); !errors.Is(err, export.ErrCorrupt) || !strings.Contains(err.Error(), export.HeaderQueue) {
		t.Errorf("foreign message: %v", err)
	}
	a, b := export.MessageID("q", export.Entry{Key: []byte("k"), Seq: 1}), export.MessageID("q", export.Entry{Key: []byte("k"), Seq: 2})
	if a == b || a != export.MessageID("q", export.Entry{Key: []byte("k"), Seq: 1, Value: []byte("other")}) {
		t.Errorf("message ids %q and %q: want one per key and sequence number", a, b)
	}
}

// A sink whose server went away fails the batch within its timeout,
// naming the stream; a stream that does not capture the subjects is
// refused when the sink starts.
func TestJetStreamSinkFailsClearly(t *testing.T) {
	e, nc := startNATS(t)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := export.NewJetStreamSink(ctx, nc, export.JetStreamOptions{Stream: "OTHER"}); !errors.Is(err, export.ErrInvalidOptions) || !strings.Contains(err.Error(), "OTHER") {
		t.Fatalf("a stream without the sink's subjects: %v", err)
	}
	sink, err := export.NewJetStreamSink(ctx, nc, export.JetStreamOptions{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.Shutdown()
	began := time.Now()
	err = sink.Export(ctx, "q", []export.Entry{{Key: []byte("k"), Seq: 1, Value: []byte("v")}})
	if err == nil || !strings.Contains(err.Error(), "TRICKLE_EXPORT") {
		t.Fatalf("export to a stopped server: %v, want an error naming the stream", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("failing took %v, beyond the 300ms timeout", d)
	}
	if _, err := export.NewJetStreamSink(ctx, nc, export.JetStreamOptions{Subject: "a..b"}); !errors.Is(err, export.ErrInvalidOptions) {
		t.Fatalf("bad subject: %v", err)
	}
}
