package export_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trickle-dev/trickle/framework/export"
)

// compactHistory is the history the compaction benchmarks export: keys
// loaded once, then a share of them updated rounds times, then 1 % of
// them deleted; in batches of 1000 in key order, as drains hand them.
func compactHistory(keys int, share float64, rounds int) [][]export.Entry {
	value := make([]byte, 200)
	var seq uint64
	var batches [][]export.Entry
	emit := func(idx []int, del bool) {
		for i := 0; i < len(idx); i += 1000 {
			var batch []export.Entry
			for _, k := range idx[i:min(i+1000, len(idx))] {
				seq++
				e := export.Entry{Key: fmt.Appendf(nil, "https://example.org/site/%d/page/%d", k%97, k), Seq: seq, Value: value}
				if del {
					e.Value, e.Delete = nil, true
				}
				batch = append(batch, e)
			}
			batches = append(batches, batch)
		}
	}
	all := make([]int, keys)
	for i := range all {
		all[i] = i
	}
	emit(all, false)
	r := rand.New(rand.NewPCG(1, 2))
	for range rounds {
		emit(r.Perm(keys)[:int(float64(keys)*share)], false)
	}
	emit(r.Perm(keys)[:keys/100], true)
	return batches
}

// BenchmarkCompactedStream exports a history of K keys (load, a share
// updated three times, 1 % deleted) to a compacted stream and, message
// for message, to a stream that keeps everything (the earlier form, every
// entry on the queue's subject); then times a new consumer reading each
// into a table. Reported: messages per key each stream holds, and the
// time of a full read of the compacted stream as a fraction of the
// uncompacted one's.
func BenchmarkCompactedStream(b *testing.B) {
	for _, share := range []float64{0.1, 1} {
		b.Run(fmt.Sprintf("K=%d/updated=%.0f%%x3", benchEntries, share*100), func(b *testing.B) {
			benchCompacted(b, benchEntries, share, 3)
		})
	}
}

func benchCompacted(b *testing.B, keys int, share float64, rounds int) {
	nc := benchNATS(b)
	ctx := context.Background()
	history := compactHistory(keys, share, rounds)
	sink, err := export.NewJetStreamSink(ctx, nc, export.JetStreamOptions{Stream: "NEW", Subject: "new"})
	if err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"old.>"}, Storage: jetstream.FileStorage}); err != nil {
		b.Fatal(err)
	}
	entries := 0
	began := time.Now()
	for _, batch := range history {
		if err := sink.Export(ctx, "q", batch); err != nil {
			b.Fatal(err)
		}
		entries += len(batch)
	}
	published := time.Since(began)
	for _, batch := range history {
		for _, e := range batch {
			if _, err := js.PublishMsgAsync(export.Message("old.q", "q", e)); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatal("the uncompacted stream did not acknowledge within a minute")
		}
	}
	held := func(name string) uint64 {
		st, err := js.Stream(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		return st.CachedInfo().State.Msgs
	}
	newMsgs, oldMsgs := held("NEW"), held("OLD")
	read := func(stream, subject string) (time.Duration, int) {
		tab := export.NewTable()
		began := time.Now()
		if _, err := export.Consume(ctx, nc, export.ConsumeOptions{Stream: stream, Subject: subject, Queue: "q"}, func(_ string, e export.Entry) error {
			tab.Apply(e)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		return time.Since(began), len(tab.Values())
	}
	var newTook, oldTook time.Duration
	for b.Loop() {
		took, n := read("NEW", "new")
		newTook += took
		took2, n2 := read("OLD", "old")
		oldTook += took2
		if n != n2 {
			b.Fatalf("the compacted stream reads as %d keys, the uncompacted as %d", n, n2)
		}
	}
	b.ReportMetric(float64(newMsgs)/float64(keys), "msgs/key-compacted")
	b.ReportMetric(float64(oldMsgs)/float64(keys), "msgs/key-uncompacted")
	b.ReportMetric(newTook.Seconds()/float64(b.N)*1000, "ms/read-compacted")
	b.ReportMetric(oldTook.Seconds()/float64(b.N)*1000, "ms/read-uncompacted")
	b.ReportMetric(newTook.Seconds()/oldTook.Seconds(), "read-ratio")
	b.ReportMetric(float64(entries)/published.Seconds(), "entries/s-published")
}
