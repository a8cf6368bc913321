package remote

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/store"
)

// heldStore is a busy service: each Apply and ReadRow waits until the
// test lets it through (a value on release), after saying it arrived.
type heldStore struct {
	store.Store
	arrived, release chan struct{}
}

func (s *heldStore) hold() {
	s.arrived <- struct{}{}
	<-s.release
}

func (s *heldStore) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	s.hold()
	return s.Store.Apply(ctx, txn)
}

func (s *heldStore) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	s.hold()
	return s.Store.ReadRow(ctx, table, row, cols, spans)
}

// TestPartsGetTimeForTheirSize: a request too large for one message gets
// its size at MinTransferRate on top of the request timeout, so a large
// row transaction that a busy service holds for longer than the request
// timeout still succeeds; a small request held the same way fails after
// the request timeout, as before; and an answer in parts gets the time
// its size needs from its first part on, even when the handler used much
// of the request's time.
func TestPartsGetTimeForTheirSize(t *testing.T) {
	const timeout = 2 * time.Second
	ns := startNATSMaxPayload(t, 64<<10)
	held := &heldStore{Store: openMem(t), arrived: make(chan struct{}), release: make(chan struct{})}
	_, _, c := serveClient(t, ns, held, nil, &ClientOptions{RequestTimeout: timeout, MinTransferRate: 512 << 10})
	t.Cleanup(func() { close(held.release) }) // before the service stops: nothing stays held
	ctx := context.Background()
	v := col("f", "v")
	apply := func(row string, value []byte) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := c.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte(row), Mutations: []store.Mutation{{Column: v, Ts: 1, Value: value}}})
			done <- err
		}()
		return done
	}

	// The small request is held until its client gave up.
	done := apply("small", []byte("x"))
	recv(t, held.arrived, "the small Apply at the service")
	err := recv(t, done, "the small Apply's answer")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "within 2s") {
		t.Errorf("small Apply held by the service: %v, want ErrUnavailable after the request timeout", err)
	}
	held.release <- struct{}{}

	// The large one (6 MiB: 12 s on top of the request timeout) is held
	// for longer than the request timeout.
	big := bigValue(7, 6<<20)
	done = apply("big", big)
	recv(t, held.arrived, "the large Apply at the service")
	time.Sleep(timeout + timeout/4)
	held.release <- struct{}{}
	if err := recv(t, done, "the large Apply's answer"); err != nil {
		t.Fatalf("large Apply held by the service past the request timeout: %v", err)
	}

	// The handler of a read with a large answer takes half the request's
	// time; the answer's ~100 parts still arrive (TestCallExtend and
	// TestPartsDownloadKeptWhilePulled pin down the two sides of that).
	read := make(chan []store.Cell, 1)
	go func() {
		cells, err := c.ReadRow(ctx, "t", []byte("big"), []store.Column{v}, nil)
		if err != nil {
			t.Errorf("ReadRow of a large answer after a slow handler: %v", err)
		}
		read <- cells
	}()
	recv(t, held.arrived, "the ReadRow at the service")
	time.Sleep(timeout / 2)
	held.release <- struct{}{}
	if cells := recv(t, read, "the ReadRow's answer"); len(cells) != 1 || !bytes.Equal(cells[0].Value, big) {
		t.Fatalf("ReadRow: %d cells, want the 6 MiB value", len(cells))
	}
}

// TestPartsStallNoticedWithinRequestTimeout: however much time a large
// request's size gives it, a part its service stops answering fails the
// request after the request timeout, naming the part, rather than when
// the whole allowance (or the caller's deadline) is spent.
func TestPartsStallNoticedWithinRequestTimeout(t *testing.T) {
	ns := startNATSMaxPayload(t, 64<<10)
	svc := connect(t, ns)
	// A service that acknowledges the first part of an upload and then
	// goes silent.
	partSubj := subject(DefaultPrefix, "store", "part") + ".stalled"
	if _, err := svc.Subscribe(subject(DefaultPrefix, "store", storeApply), func(m *nats.Msg) {
		var e encoder
		e.frame(&frame{kind: frameAck, id: 1, seq: 1, subject: partSubj, maxChunk: 32 << 10})
		m.Respond(e.b)
	}); err != nil {
		t.Fatal(err)
	}
	parts := make(chan struct{}, 16)
	if _, err := svc.Subscribe(partSubj, func(*nats.Msg) { parts <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := NewStore(connect(t, ns), &ClientOptions{RequestTimeout: 300 * time.Millisecond, MinTransferRate: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 1 MiB at 1 KiB/s: the size alone is worth 17 minutes; the caller
	// allows 30s.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: col("f", "v"), Ts: 1, Value: bigValue(3, 1<<20)}}})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "part 1") || !strings.Contains(err.Error(), "within 300ms") {
		t.Errorf("Apply with a stalled part: %v, want ErrUnavailable naming part 1 and the request timeout", err)
	}
	if ctx.Err() != nil {
		t.Error("the stall was noticed only at the caller's deadline")
	}
	recv(t, parts, "part 1 at the silent service")
}

// TestCallTime: a request of one message gets the request timeout; one
// in parts gets its size at MinTransferRate on top; neither gets more
// than the caller's time left or an hour.
func TestCallTime(t *testing.T) {
	cfg := (&ClientOptions{MinTransferRate: 1 << 20}).EnsureDefaults()
	for _, tc := range []struct {
		size       int
		left, want time.Duration
	}{
		{0, 0, 10 * time.Second},
		{0, 5 * time.Second, 5 * time.Second},
		{16 << 20, 0, 26 * time.Second},
		{16 << 20, 20 * time.Second, 20 * time.Second}, // the caller's deadline
		{16 << 20, 5 * time.Second, 5 * time.Second},   // less than the request timeout
		{1 << 50, 0, time.Hour},
	} {
		if got := callTime(cfg, tc.size, tc.left); got != tc.want {
			t.Errorf("callTime(%d bytes, left %v) = %v, want %v", tc.size, tc.left, got, tc.want)
		}
	}
}

// TestPartsDownloadKeptWhilePulled: an answer in parts stays while its
// client keeps pulling, past the time its request had left when it was
// opened, and is dropped once the client stops for as long as the request
// asked.
func TestPartsDownloadKeptWhilePulled(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	ns := startNATS(t)
	svc := slowService()
	svc.now = clk.now
	env, _, pull := rawDownload(t, ns, svc, 5_000_000)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := pull(seq); err != nil {
			t.Fatalf("pull %d, %v after the download opened: %v", seq, time.Duration(seq-1)*50*time.Second, err)
		}
		clk.advance(50 * time.Second) // pull 3 comes 100s after the open: past the request's minute
	}
	clk.advance(11 * time.Second) // a minute since the last pull
	if err := pull(4); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "unknown download") {
		t.Errorf("pull a minute after the last: %v, want unknown download", err)
	}
	if held := env.svc.srv.parts.bytesHeld(); held != 0 {
		t.Errorf("%d bytes held after the download expired", held)
	}
}

// TestCallExtend: once an answer in parts announces its size, the call's
// time is what that size needs from then on (within the caller's
// deadline), however little of the request's time was left.
func TestCallExtend(t *testing.T) {
	cl := &client{cfg: (&ClientOptions{RequestTimeout: time.Second, MinTransferRate: 1 << 20}).EnsureDefaults()}
	for _, tc := range []struct {
		name      string
		caller    time.Duration // 0: no deadline
		size      int
		min, max  time.Duration // bounds of the deadline from now
		unchanged bool
	}{
		{name: "no caller deadline", size: 6 << 20, min: 6 * time.Second, max: 7 * time.Second},
		{name: "caller allows less", caller: 3 * time.Second, size: 6 << 20, min: 2 * time.Second, max: 3 * time.Second},
		{name: "caller allows less than the request timeout", caller: 500 * time.Millisecond, size: 6 << 20, min: 100 * time.Millisecond, max: 500 * time.Millisecond},
		{name: "already enough", size: 1 << 10, unchanged: true},
	} {
		ctx := context.Background()
		if tc.caller > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tc.caller)
			defer cancel()
		}
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		if tc.unchanged {
			cancel()
			rctx, cancel = context.WithTimeout(ctx, time.Hour)
		}
		r := &call{c: cl, ctx: ctx, rctx: rctx, cancel: cancel, timeout: time.Second}
		r.extend(tc.size)
		dl, ok := r.rctx.Deadline()
		switch left := time.Until(dl); {
		case !ok:
			t.Errorf("%s: no deadline after extend", tc.name)
		case tc.unchanged && r.rctx != rctx:
			t.Errorf("%s: the call's context was replaced", tc.name)
		case !tc.unchanged && (left < tc.min || left > tc.max):
			t.Errorf("%s: %v left after extend, want %v..%v", tc.name, left, tc.min, tc.max)
		case !tc.unchanged && r.timeout > tc.max:
			t.Errorf("%s: the call's time is %v after extend (named in its errors), want at most %v", tc.name, r.timeout, tc.max)
		}
		r.release()
	}
}
