package export_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trickle-dev/trickle/framework/export"
)

// kvTable reads a bucket as a plain KV client does, and decodes its keys.
func kvTable(t *testing.T, kv jetstream.KeyValue) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		key, hashed, err := export.DecodeKeyToken(k)
		if err != nil || hashed {
			t.Fatalf("KV key %q: %v (hashed %v)", k, err, hashed)
		}
		out[string(key)] = string(e.Value())
	}
	return out
}

// A queue exported into a KV bucket leaves the bucket equal to the table:
// one key per key, history 1, deleted keys deleted; an older entry sent
// again changes nothing.
func TestKVViewEqualsTheTable(t *testing.T) {
	_, nc := startNATS(t)
	ctx := context.Background()
	sink, err := export.NewKVSink(ctx, nc, export.KVOptions{Bucket: "docs-table", TombstoneAge: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	q, env := start(t, export.Options{Name: "docs", Buckets: 3, BatchSize: 5}, sink, nil)
	want := map[string]string{}
	for i := range 60 {
		k, v := fmt.Sprintf("http://site.example/doc %d", i%17), fmt.Sprintf("v%d", i)
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
	got := kvTable(t, sink.KV())
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the bucket holds %v\nwant %v", got, want)
	}
	st, err := sink.KV().Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.History() != 1 || st.Values() != 17 {
		t.Fatalf("bucket history %d, %d values; want 1 and 17 (one per key, deleted ones as markers)", st.History(), st.Values())
	}
	// A late re-delivery, by another process, of an old value.
	other, err := export.NewKVSink(ctx, nc, export.KVOptions{Bucket: "docs-table"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Export(ctx, "docs", []export.Entry{{Key: []byte("http://site.example/doc 1"), Seq: 1, Value: []byte("old")}}); err != nil {
		t.Fatal(err)
	}
	if v := kvTable(t, sink.KV())["http://site.example/doc 1"]; v != want["http://site.example/doc 1"] || other.Stale() != 1 {
		t.Fatalf("after an old re-delivery: %q (%d stale), want %q", v, other.Stale(), want["http://site.example/doc 1"])
	}
	// Deleted keys' markers leave after their age.
	for deadline := time.Now().Add(15 * time.Second); ; {
		st, err := sink.KV().Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Values() == uint64(len(want)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d values in the bucket 15s after the delete markers' age, want %d", st.Values(), len(want))
		}
		time.Sleep(100 * time.Millisecond) // polling for the server's expiry
	}
	if err := sink.Export(ctx, "other", []export.Entry{{Key: []byte("k"), Seq: 1}}); !errors.Is(err, export.ErrInvalidOptions) || !strings.Contains(err.Error(), "docs-table") {
		t.Fatalf("a second queue into the bucket: %v", err)
	}
}
