package remote

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/store"
)

// fakeClock is the injectable clock of transfer expiry.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestPartsMemoryCap: what exceeds the cap fails with ErrTooLarge, what
// does not fit next to transfers in progress with ErrBusy, and an
// abandoned upload stops counting once it expires.
func TestPartsMemoryCap(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	var mu sync.Mutex
	var expired []uint64
	ns := startNATS(t)
	svc := slowService()
	svc.MaxBufferedBytes, svc.now = 4<<20, clk.now
	svc.onExpire = func(id uint64, upload bool) {
		if upload {
			mu.Lock()
			expired = append(expired, id)
			mu.Unlock()
		}
	}
	env := newStoreEnvOn(t, ns, svc, &ClientOptions{RequestTimeout: 5 * time.Minute, MaxBufferedBytes: 4 << 20})
	c := col("f", "v")
	apply := func(row string, size int) error {
		_, err := env.client.Apply(bg, &store.RowTxn{Table: "t", Row: []byte(row), Mutations: []store.Mutation{{Column: c, Ts: 1, Value: bigValue(9, size)}}})
		return err
	}
	stored := func(row string) bool {
		cells, err := env.db.ReadRow(bg, "t", []byte(row), []store.Column{c}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(cells) > 0
	}

	err := apply("huge", 6_000_000)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "Apply") || !strings.Contains(err.Error(), "6000") ||
		!strings.Contains(err.Error(), fmt.Sprint(4<<20)) {
		t.Errorf("Apply above the cap: %v; want ErrTooLarge naming Apply and both sizes", err)
	}
	if stored("huge") {
		t.Error("the too large row transaction was applied")
	}

	// An answer above the service's cap.
	if _, err := env.db.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("5mb"), Mutations: []store.Mutation{{Column: c, Ts: 1, Value: bigValue(5, 5_000_000)}}}); err != nil {
		t.Fatal(err)
	}
	_, err = env.client.ReadRow(bg, "t", []byte("5mb"), []store.Column{c}, nil)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "ReadRow") || !strings.Contains(err.Error(), "response of 5000") {
		t.Errorf("ReadRow above the cap: %v; want ErrTooLarge naming ReadRow and the response size", err)
	}

	// An answer above a client's cap: the client refuses it and tells the
	// service, which drops it at once.
	small, err := NewStore(connect(t, ns), &ClientOptions{RequestTimeout: 5 * time.Minute, MaxBufferedBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := apply("2mb", 2_000_000); err != nil {
		t.Fatal(err)
	}
	_, err = small.ReadRow(bg, "t", []byte("2mb"), []store.Column{c}, nil)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "client's limit of 1048576") {
		t.Errorf("ReadRow above the client's cap: %v; want ErrTooLarge naming the client's limit", err)
	}
	syncParts(t, small.c.nc, env.svc.srv.partSubject)
	if held := env.svc.srv.parts.bytesHeld(); held != 0 {
		t.Errorf("%d bytes held after the client refused the answer", held)
	}

	// An abandoned upload of 3 MiB leaves no room for a 2 MB request.
	raw := connect(t, ns)
	id, _ := openRaw(t, raw, "trickle.store.apply", make([]byte, 3<<20), 1000, time.Minute)
	err = apply("busy", 2_000_000)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "Apply") || !strings.Contains(err.Error(), "2000") {
		t.Errorf("Apply next to an abandoned upload: %v; want ErrBusy naming Apply and the size", err)
	}
	if stored("busy") {
		t.Error("the refused row transaction was applied")
	}
	// Once the abandoned upload's deadline (its client's timeout, a
	// minute) has passed, it is dropped and the request goes through.
	clk.advance(time.Minute)
	if err := apply("busy", 2_000_000); err != nil {
		t.Fatalf("Apply after the abandoned upload expired: %v", err)
	}
	if !stored("busy") {
		t.Error("row transaction not applied")
	}
	mu.Lock()
	if len(expired) != 1 || expired[0] != id {
		t.Errorf("expired uploads %v, want [%d]", expired, id)
	}
	mu.Unlock()
	if held := env.svc.srv.parts.bytesHeld(); held != 0 {
		t.Errorf("%d bytes held after the transfers ended", held)
	}
}

// TestPartsExpiryTimer: an abandoned upload is dropped at its deadline
// even when no other request comes.
func TestPartsExpiryTimer(t *testing.T) {
	type expiry struct {
		id     uint64
		upload bool
	}
	expired := make(chan expiry, 4)
	ns := startNATS(t)
	env := newStoreEnvOn(t, ns, &ServiceOptions{onExpire: func(id uint64, upload bool) { expired <- expiry{id, upload} }}, nil)
	wait := func(what string) expiry {
		t.Helper()
		select {
		case e := <-expired:
			return e
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatalf("%s never dropped", what)
			return expiry{}
		}
	}
	raw := connect(t, ns)
	id, partSubj := openRaw(t, raw, "trickle.store.apply", make([]byte, 3000), 1000, 50*time.Millisecond)
	if e := wait("abandoned upload"); e != (expiry{id, true}) {
		t.Fatalf("expired %+v, want upload %d", e, id)
	}
	if held := env.svc.srv.parts.bytesHeld(); held != 0 {
		t.Errorf("%d bytes held after the upload expired", held)
	}
	_, err := rawRequest(t, raw, partSubj, partFrame(id, 1, make([]byte, 1000)))
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "unknown upload") {
		t.Errorf("part of the expired upload: %v, want unknown upload", err)
	}

}

// TestPartsDownloadExpiry: an answer in parts whose client never pulls
// is dropped when the client's timeout has passed.
func TestPartsDownloadExpiry(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	expired := make(chan uint64, 4)
	ns := startNATS(t)
	svc := slowService()
	svc.now = clk.now
	svc.onExpire = func(id uint64, upload bool) {
		if !upload {
			expired <- id
		}
	}
	env, f, pull := rawDownload(t, ns, svc, 3_000_000)
	if env.svc.srv.parts.bytesHeld() < 3_000_000 {
		t.Fatal("the answer in parts is not counted")
	}
	if err := pull(1); err != nil {
		t.Fatalf("pull within the deadline: %v", err)
	}
	clk.advance(time.Minute) // the handler's deadline, at most the client's minute, has passed
	if err := pull(2); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "unknown download") {
		t.Errorf("pull of the expired download: %v, want unknown download", err)
	}
	select {
	case id := <-expired:
		if id != f.id {
			t.Errorf("expired download %d, want %d", id, f.id)
		}
	default:
		t.Error("expiry not reported")
	}
	if held := env.svc.srv.parts.bytesHeld(); held != 0 {
		t.Errorf("%d bytes held after the download expired", held)
	}
}

// TestPartsStop: stopping a service drops its transfers; their parts are
// then refused.
func TestPartsStop(t *testing.T) {
	ns := startNATS(t)
	env := newStoreEnvOn(t, ns, nil, nil)
	raw := connect(t, ns)
	id, partSubj := openRaw(t, raw, "trickle.store.apply", make([]byte, 3000), 1000, time.Minute)
	if err := env.svc.Stop(); err != nil {
		t.Fatal(err)
	}
	if held := env.svc.srv.parts.bytesHeld(); held != 0 {
		t.Errorf("%d bytes held after Stop", held)
	}
	_, err := rawRequest(t, raw, partSubj, partFrame(id, 1, make([]byte, 1000)))
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("part after Stop: %v, want no responders", err)
	}
}

// rawDownload serves a store holding one cell of size bytes with svc on
// ns, asks for it with a minute's timeout on a raw connection, and returns
// the store's env, the download frame of the answer and a function that
// pulls part seq of it.
func rawDownload(t *testing.T, ns *natsserver.Server, svc *ServiceOptions, size int) (*storeEnv, frame, func(seq uint64) error) {
	t.Helper()
	env := newStoreEnvOn(t, ns, svc, slowClient())
	c := col("f", "v")
	if _, err := env.db.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: c, Ts: 1, Value: bigValue(1, size)}}}); err != nil {
		t.Fatal(err)
	}
	raw := connect(t, ns)
	var e encoder
	e.header(time.Minute)
	e.readRowReq("t", []byte("r"), []store.Column{c}, nil)
	msg, err := rawRequest(t, raw, "trickle.store.readrow", e.b)
	if err != nil {
		t.Fatal(err)
	}
	d := newDecoder(msg.Data)
	f := d.frame()
	if err := d.finish(); err != nil || f.kind != frameDownload {
		t.Fatalf("answer %s frame, %v; want a download", f.kind, err)
	}
	pull := func(seq uint64) error {
		var p encoder
		p.frame(&frame{kind: framePull, id: f.id, seq: seq, maxChunk: 1 << 20})
		_, err := rawRequest(t, raw, f.subject, p.b)
		return err
	}
	return env, f, pull
}
