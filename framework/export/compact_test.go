package export_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trickle-dev/trickle/framework/export"
)

// streamMsgs is how many messages stream holds.
func streamMsgs(t *testing.T, nc *nats.Conn, stream string) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func newSink(t *testing.T, nc *nats.Conn, opts export.JetStreamOptions) *export.JetStreamSink {
	t.Helper()
	if opts.Stream == "" {
		opts.Stream, opts.Subject = "EXP", "app.export"
	}
	s, err := export.NewJetStreamSink(context.Background(), nc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// versions returns an entry per key k0…k(n-1), of sequence number seq
// and value "k@seq".
func versions(n int, seq uint64) []export.Entry {
	out := make([]export.Entry, n)
	for i := range out {
		k := fmt.Sprintf("k%02d", i)
		out[i] = export.Entry{Key: []byte(k), Seq: seq, Value: fmt.Appendf(nil, "%s@%d", k, seq)}
	}
	return out
}

// Keys updated many times through a queue leave one message each in the
// stream: the latest value, or the tombstone of a deleted key.
func TestCompactedStreamHoldsOneMessagePerKey(t *testing.T) {
	_, nc := startNATS(t)
	ctx := context.Background()
	sink := newSink(t, nc, export.JetStreamOptions{})
	q, env := start(t, export.Options{Name: "docs", Buckets: 4, BatchSize: 8}, sink, nil)
	want := map[string]string{}
	for round := range 4 {
		for i := range 40 {
			if round > 0 && i%4 != 0 {
				continue // a quarter of the keys change three more times
			}
			k, v := fmt.Sprintf("https://example.org/page %d?x=%d", i, i), fmt.Sprintf("v%d.%d", i, round)
			if i == 4 {
				k = strings.Repeat("https://example.org/long/", 20) // a hashed subject
			}
			if round == 3 && i%8 == 0 {
				v = "" // and some of those are deleted at the end
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
	}
	if n := streamMsgs(t, nc, "EXP"); n != 40 {
		t.Fatalf("the stream holds %d messages for 40 keys (70 entries)", n)
	}
	tab, n := readStream(t, nc, "EXP")
	equalTo(t, tab, want)
	if n != 40 {
		t.Fatalf("the consumer read %d messages, want one per key (40)", n)
	}
}

// A batch that fails half-way, then is sent again after a newer batch of
// the same keys got through, cannot make an older value win: neither
// when the same sink sends it again, nor when another process (a sink
// that has not seen the keys) does.
func TestAnOlderEntryNeverReplacesANewerOne(t *testing.T) {
	_, nc := startNATS(t)
	ctx := context.Background()
	sink := newSink(t, nc, export.JetStreamOptions{Window: 3})
	old, newer := versions(10, 10), versions(10, 20)
	errInjected := errors.New("connection lost half-way")
	export.SetFault(sink, func(i int) error {
		if i == 5 {
			return errInjected
		}
		return nil
	})
	if err := sink.Export(ctx, "docs", old); !errors.Is(err, errInjected) {
		t.Fatalf("the first batch: %v, want the injected failure", err)
	}
	export.SetFault(sink, nil)
	if err := sink.Export(ctx, "docs", newer); err != nil {
		t.Fatal(err)
	}
	if err := sink.Export(ctx, "docs", old); err != nil { // the queue sends the failed batch again
		t.Fatal(err)
	}
	other := newSink(t, nc, export.JetStreamOptions{})
	if err := other.Export(ctx, "docs", old); err != nil { // and so does another process
		t.Fatal(err)
	}
	// Messages published straight on the subjects, older than what they
	// hold, as a pipelined publish overtaken by a newer one would be, are
	// refused too.
	if err := other.Export(ctx, "docs", append(versions(10, 15), versions(10, 5)...)); err != nil {
		t.Fatal(err)
	}
	tab, n := readStream(t, nc, "EXP")
	if n != 10 {
		t.Fatalf("%d messages read, want 10", n)
	}
	for _, e := range newer {
		if v, _ := tab.Get(string(e.Key)); string(v) != string(e.Value) {
			t.Errorf("key %s: %q, want %q", e.Key, v, e.Value)
		}
	}
	if sink.Stale() != 10 || other.Stale() != 20 {
		t.Errorf("%d and %d entries found stale, want 10 and 20 (those of 5 and 15 collapse into 15)", sink.Stale(), other.Stale())
	}
}

// Processes draining the same keys at once, each publishing its own
// versions in its own order, leave every key's highest sequence number
// on its subject.
func TestConcurrentSinksKeepTheHighestSequence(t *testing.T) {
	_, nc := startNATS(t)
	ctx := context.Background()
	const keys, writers, batches = 20, 4, 30
	var wg sync.WaitGroup
	top := make([]uint64, keys)
	var mu sync.Mutex
	for w := range writers {
		sink := newSink(t, nc, export.JetStreamOptions{Window: 8})
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range batches {
				var batch []export.Entry
				for k := range keys {
					if r.IntN(2) == 0 {
						continue
					}
					seq := uint64(r.IntN(1000) + 1)
					batch = append(batch, export.Entry{Key: fmt.Appendf(nil, "k%02d", k), Seq: seq, Value: fmt.Appendf(nil, "%d", seq)})
					mu.Lock()
					top[k] = max(top[k], seq)
					mu.Unlock()
				}
				if err := sink.Export(ctx, "docs", batch); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	tab, n := readStream(t, nc, "EXP")
	if n != keys {
		t.Fatalf("%d messages read, want %d", n, keys)
	}
	for k := range keys {
		if v, _ := tab.Get(fmt.Sprintf("k%02d", k)); string(v) != fmt.Sprint(top[k]) {
			t.Errorf("key k%02d holds %s, want its highest sequence number %d", k, v, top[k])
		}
	}
}

// A tombstone leaves the stream once it is TombstoneAge old; a value
// stays.
func TestTombstonesAreRemovedAfterTheirAge(t *testing.T) {
	_, nc := startNATS(t)
	ctx := context.Background()
	sink := newSink(t, nc, export.JetStreamOptions{TombstoneAge: time.Second})
	if err := sink.Export(ctx, "docs", []export.Entry{{Key: []byte("gone"), Seq: 1, Value: []byte("v")}, {Key: []byte("kept"), Seq: 2, Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Export(ctx, "docs", []export.Entry{{Key: []byte("gone"), Seq: 3, Delete: true}}); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, nc, "EXP"); n != 2 {
		t.Fatalf("%d messages after the deletion, want the tombstone and kept", n)
	}
	for deadline := time.Now().Add(15 * time.Second); streamMsgs(t, nc, "EXP") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the tombstone is still in the stream 15s after its age of 1s")
		}
		time.Sleep(100 * time.Millisecond) // polling for the server's expiry
	}
	tab, _ := readStream(t, nc, "EXP")
	if fmt.Sprint(tab.Keys()) != "[kept]" {
		t.Fatalf("keys %v after the tombstone's age, want [kept]", tab.Keys())
	}
	// The sink remembers the tombstone: a late re-delivery of the value it
	// deleted does not bring the key back.
	if err := sink.Export(ctx, "docs", []export.Entry{{Key: []byte("gone"), Seq: 1, Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, nc, "EXP"); n != 1 {
		t.Fatalf("%d messages after a late re-delivery, want 1", n)
	}
}

// A consumer that starts while the table is being written reads every
// key's entry acknowledged before it began (or a newer one), and,
// following, ends with every key's latest value.
func TestAConsumerStartingMidWaySeesEveryKeysLatest(t *testing.T) {
	_, nc := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sink := newSink(t, nc, export.JetStreamOptions{})
	const keys, rounds = 50, 40
	var (
		mu    sync.Mutex
		acked = map[string]uint64{} // per key, the last sequence number acknowledged
	)
	half := make(chan map[string]uint64, 1)
	done := make(chan error, 1)
	go func() {
		for r := range rounds {
			batch := versions(keys, uint64(r+1))
			if r%5 == 4 {
				batch[r%keys] = export.Entry{Key: batch[r%keys].Key, Seq: uint64(r + 1), Delete: true}
			}
			if err := sink.Export(ctx, "docs", batch); err != nil {
				done <- err
				return
			}
			mu.Lock()
			for _, e := range batch {
				acked[string(e.Key)] = e.Seq
			}
			if r == rounds/2 {
				snap := map[string]uint64{}
				for k, s := range acked {
					snap[k] = s
				}
				half <- snap
			}
			mu.Unlock()
		}
		done <- nil
	}()
	before := <-half
	seen := export.NewTable()
	if _, err := export.Consume(ctx, nc, export.ConsumeOptions{Stream: "EXP", Subject: "app.export", FetchWait: 2 * time.Second}, func(_ string, e export.Entry) error {
		seen.Apply(e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, e := range seen.Entries() {
		if e.Seq < before[string(e.Key)] {
			t.Errorf("key %s: read %d, but %d was acknowledged before the consumer began", e.Key, e.Seq, before[string(e.Key)])
		}
	}
	if got := len(seen.Entries()); got != keys {
		t.Errorf("the consumer read %d keys, want %d", got, keys)
	}
	follow := export.NewTable()
	fctx, stop := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() {
		_, err := export.Consume(fctx, nc, export.ConsumeOptions{Stream: "EXP", Subject: "app.export", Follow: true, FetchWait: 200 * time.Millisecond},
			func(_ string, e export.Entry) error { follow.Apply(e); return nil })
		followed <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	final := export.NewTable()
	for r := range rounds {
		batch := versions(keys, uint64(r+1))
		if r%5 == 4 {
			batch[r%keys] = export.Entry{Key: batch[r%keys].Key, Seq: uint64(r + 1), Delete: true}
		}
		final.Export(ctx, "docs", batch)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if fmt.Sprint(follow.Values()) == fmt.Sprint(final.Values()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the following consumer holds %d keys, not the final table's %d", len(follow.Values()), len(final.Values()))
		}
		time.Sleep(20 * time.Millisecond) // polling for the follower to catch up
	}
	stop()
	if err := <-followed; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// Keys become readable subject tokens and KV keys; long keys are hashed;
// tokens decode back.
func TestKeyTokens(t *testing.T) {
	kvKey := regexp.MustCompile(`^[-/_=a-zA-Z0-9]+$`)
	for _, tc := range []struct{ key, token string }{
		{"http://a.example/x?y", "http=3A//a=2Eexample/x=3Fy"},
		{"a b*c>d.e=f", "a=20b=2Ac=3Ed=2Ee=3Df"},
		{"\x00\xff", "=00=FF"},
	} {
		got, hashed := export.KeyToken([]byte(tc.key), 0)
		if got != tc.token || hashed {
			t.Errorf("KeyToken(%q) = %q, %v; want %q", tc.key, got, hashed, tc.token)
		}
		back, _, err := export.DecodeKeyToken(got)
		if err != nil || string(back) != tc.key {
			t.Errorf("DecodeKeyToken(%q) = %q, %v", got, back, err)
		}
	}
	long := []byte(strings.Repeat("é", 50)) // 100 bytes, 300 escaped
	tok, hashed := export.KeyToken(long, 0)
	if !hashed || len(tok) != 66 || !kvKey.MatchString(tok) {
		t.Errorf("a long key's token %q (hashed %v): want == and a SHA-256", tok, hashed)
	}
	if tok2, _ := export.KeyToken(append(long, 'x'), 0); tok2 == tok {
		t.Error("two long keys share a token")
	}
	if _, h, _ := export.DecodeKeyToken(tok); !h {
		t.Error("a hashed token does not decode as hashed")
	}
	for _, bad := range []string{"", "a.b", "=4", "=ZZ", "a b"} {
		if _, _, err := export.DecodeKeyToken(bad); err == nil {
			t.Errorf("DecodeKeyToken(%q) succeeded", bad)
		}
	}
	if tok, _ := export.KeyToken([]byte("x"), 0); !kvKey.MatchString(tok) {
		t.Error(tok)
	}
}
