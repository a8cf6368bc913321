package export_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trickle-dev/trickle/framework/export"
)

// A stream written by the sink of an earlier release (every entry on the
// queue's subject, keyed by a header) reads as it is, and the sink moves
// it into the compacted form when it starts: one message per key, the
// old subject purged, the table unchanged.
func TestOldFormatStreamsAreReadAndMigrated(t *testing.T) {
	_, nc := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EXP", Subjects: []string{"app.export.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	var seq uint64
	for round := range 3 {
		for _, e := range versions(20, uint64(round+1)) {
			seq++
			if round == 2 && seq%6 == 0 {
				e = export.Entry{Key: e.Key, Seq: e.Seq, Delete: true}
				delete(want, string(e.Key))
			} else {
				want[string(e.Key)] = string(e.Value)
			}
			if _, err := js.PublishMsg(ctx, export.Message("app.export.docs", "docs", e)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tab, n := readStream(t, nc, "EXP")
	equalTo(t, tab, want)
	if n != 60 {
		t.Fatalf("read %d messages of the old format, want all 60", n)
	}
	sink := newSink(t, nc, export.JetStreamOptions{})
	if m := streamMsgs(t, nc, "EXP"); m != 20 {
		t.Fatalf("%d messages after the migration, want one per key (20)", m)
	}
	st, err := js.Stream(ctx, "EXP")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := st.CachedInfo().Config; cfg.MaxMsgsPerSubject != 1 || !cfg.AllowMsgTTL {
		t.Fatalf("the migrated stream keeps %d messages per subject, TTLs %v", cfg.MaxMsgsPerSubject, cfg.AllowMsgTTL)
	}
	tab, n = readStream(t, nc, "EXP")
	equalTo(t, tab, want)
	if n != 20 {
		t.Fatalf("read %d messages after the migration, want 20", n)
	}
	// The migrated keys are known to the compacted form: an old entry
	// exported again loses.
	if err := sink.Export(ctx, "docs", versions(20, 1)); err != nil {
		t.Fatal(err)
	}
	tab, _ = readStream(t, nc, "EXP")
	equalTo(t, tab, want)
}
