package remote

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/store"
)

// rawRequest sends data to subj and returns the answer, or the error it
// carries (as a StoreClient would map it).
func rawRequest(t *testing.T, nc *nats.Conn, subj string, data []byte) (*nats.Msg, error) {
	t.Helper()
	msg, err := nc.Request(subj, data, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if err := responseError(storeService, "raw", msg); err != nil {
		return nil, err
	}
	return msg, nil
}

func partFrame(id, seq uint64, chunk []byte) []byte {
	var e encoder
	e.frame(&frame{kind: framePart, id: id, seq: seq, chunk: chunk})
	return e.b
}

// openRaw starts an upload of msg to endpoint subj with a first part of
// chunk bytes, and returns the upload's id and part subject.
func openRaw(t *testing.T, nc *nats.Conn, subj string, msg []byte, chunk int, timeout time.Duration) (uint64, string) {
	t.Helper()
	var e encoder
	e.frame(&frame{kind: frameOpen, timeout: timeout, total: uint64(len(msg)), sum: checksum(msg), chunk: msg[:chunk]})
	ans, err := rawRequest(t, nc, subj, e.b)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	d := newDecoder(ans.Data)
	f := d.frame()
	if err := d.finish(); err != nil || f.kind != frameAck || f.seq != 1 {
		t.Fatalf("answer to an open: %s frame for part %d, %v; want an ack for part 1", f.kind, f.seq, err)
	}
	return f.id, f.subject
}

// syncParts returns once the service behind subj has handled everything
// nc sent it before: frames of one connection reach a subscription in
// order, and this one is answered.
func syncParts(t *testing.T, nc *nats.Conn, subj string) {
	t.Helper()
	var e encoder
	e.frame(&frame{kind: framePull, id: 1 << 62, seq: 1, maxChunk: 1})
	if _, err := rawRequest(t, nc, subj, e.b); !errors.Is(err, ErrProtocol) {
		t.Fatalf("sync pull: %v, want an unknown download", err)
	}
}

// TestPartsInjected feeds a service crafted uploads: a lost, repeated,
// corrupted or overlong part fails the request with a clear error and
// nothing of it is applied; the same parts in order apply it.
func TestPartsInjected(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	nc := connect(t, env.ns)
	txn := &store.RowTxn{Table: "t", Row: []byte("r"),
		Mutations: []store.Mutation{{Column: col("f", "v"), Ts: 1, Value: bigValue(1, 2900)}}}
	var e encoder
	e.header(time.Minute)
	e.applyReq(txn)
	req := e.b
	chunks := [][]byte{req[:1000], req[1000:2000], req[2000:]}
	applied := func() bool {
		cells, err := env.db.ReadRow(bg, "t", []byte("r"), []store.Column{col("f", "v")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(cells) > 0
	}
	corrupt := append([]byte{^chunks[2][0]}, chunks[2][1:]...)
	overlong := append(bytes.Clone(chunks[2]), 0)
	var openFrame encoder
	openFrame.frame(&frame{kind: frameOpen, total: 1, chunk: []byte{1}})
	for _, tc := range []struct {
		name  string
		parts func(id uint64) [][]byte // after the open frame; the last answer must be an error
		want  string
	}{
		// A part lost and one overtaking another look the same: the next
		// part to arrive is not the one expected.
		{"lost or reordered", func(id uint64) [][]byte { return [][]byte{partFrame(id, 2, chunks[2])} }, "got part 2, want part 1"},
		{"repeated", func(id uint64) [][]byte { return [][]byte{partFrame(id, 1, chunks[1]), partFrame(id, 1, chunks[1])} }, "got part 1, want part 2"},
		{"corrupted", func(id uint64) [][]byte { return [][]byte{partFrame(id, 1, chunks[1]), partFrame(id, 2, corrupt)} }, "checksum"},
		{"overlong", func(id uint64) [][]byte { return [][]byte{partFrame(id, 1, chunks[1]), partFrame(id, 2, overlong)} }, "overruns the announced"},
		{"wrong kind", func(uint64) [][]byte { return [][]byte{openFrame.b} }, "open frame sent to the part subject"},
		{"garbage", func(uint64) [][]byte { return [][]byte{{partVersion, byte(framePart), 0}} }, "protocol error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, subj := openRaw(t, nc, "trickle.store.apply", req, 1000, time.Minute)
			var err error
			parts := tc.parts(id)
			for i, p := range parts {
				_, err = rawRequest(t, nc, subj, p)
				if i < len(parts)-1 && err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
			}
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a protocol error saying %q", err, tc.want)
			}
			if applied() {
				t.Fatal("the row transaction was applied")
			}
			// Errors of an upload drop it; other frames leave it alone.
			if tc.name != "wrong kind" && tc.name != "garbage" {
				if _, err := rawRequest(t, nc, subj, partFrame(id, 2, chunks[2])); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "unknown upload") {
					t.Errorf("part after the failure: %v, want unknown upload", err)
				}
			}
			var abort encoder
			abort.frame(&frame{kind: frameAbort, id: id})
			if err := nc.Publish(subj, abort.b); err != nil {
				t.Fatal(err)
			}
			syncParts(t, nc, subj)
			if held := env.svc.srv.parts.bytesHeld(); held != 0 {
				t.Errorf("%d bytes held after the upload failed", held)
			}
		})
	}
	// The same parts in order apply the row transaction, and the answer
	// is an ordinary one.
	id, subj := openRaw(t, nc, "trickle.store.apply", req, 1000, time.Minute)
	if _, err := rawRequest(t, nc, subj, partFrame(id, 1, chunks[1])); err != nil {
		t.Fatal(err)
	}
	msg, err := rawRequest(t, nc, subj, partFrame(id, 2, chunks[2]))
	if err != nil {
		t.Fatal(err)
	}
	d := newDecoder(msg.Data)
	if res := d.applyResp(); d.finish() != nil || !res.Applied {
		t.Fatalf("answer to the complete upload: %+v %v", res, d.err())
	}
	if !applied() {
		t.Fatal("complete upload not applied")
	}
	// An open frame that is the whole message is a request like any other.
	var whole encoder
	whole.header(time.Minute)
	whole.str("")
	var open encoder
	open.frame(&frame{kind: frameOpen, timeout: time.Minute, total: uint64(len(whole.b)), sum: checksum(whole.b), chunk: whole.b})
	msg, err = rawRequest(t, nc, "trickle.store.tables", open.b)
	if err != nil {
		t.Fatal(err)
	}
	if d := (newDecoder(msg.Data)); d.tablesResp() == nil || d.finish() != nil {
		t.Errorf("tables in one part: %x", msg.Data)
	}
	// Another version is refused with a clear error.
	if _, err := rawRequest(t, nc, "trickle.store.apply", []byte{partVersion + 1, 0}); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "wire version 3") {
		t.Errorf("version 3: %v", err)
	}
}

// TestPartsOracleRefuses: the oracle's messages always fit in one, and it
// says so when sent parts.
func TestPartsOracleRefuses(t *testing.T) {
	env := newOracleEnv(t, nil)
	nc := connect(t, env.ns)
	var e encoder
	e.frame(&frame{kind: frameOpen, total: 10, chunk: []byte{1}})
	msg, err := nc.Request("trickle.oracle.reserve", e.b, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := responseError(oracleService, "Reserve", msg); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "no messages in parts") {
		t.Errorf("open frame to the oracle: %v", err)
	}
}

// fakeService answers a client's ReadRow with a crafted download of msg,
// pulls being answered by chunk (nil: no answer), and records abort
// frames.
type fakeService struct {
	t      *testing.T
	nc     *nats.Conn
	aborts chan uint64
}

const fakePartSubject = "fake.store.part.x"

func newFakeService(t *testing.T, nc *nats.Conn, first func() []byte, chunk func(f frame) []byte) *fakeService {
	fs := &fakeService{t: t, nc: nc, aborts: make(chan uint64, 16)}
	for _, ep := range []string{"fake.store.readrow", "fake.store.apply"} {
		if _, err := nc.Subscribe(ep, func(m *nats.Msg) { m.Respond(first()) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Subscribe(fakePartSubject, func(m *nats.Msg) {
		d := newDecoder(m.Data)
		f := d.frame()
		if d.finish() != nil {
			return
		}
		if f.kind == frameAbort {
			fs.aborts <- f.id
			return
		}
		if b := chunk(f); b != nil {
			m.Respond(b)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestPartsClientChecks: a client refuses answers in parts that are
// inconsistent, and tells the service to drop the transfer.
func TestPartsClientChecks(t *testing.T) {
	ns := startNATS(t)
	cols := []store.Column{col("f", "v")}
	var resp encoder
	resp.readRowResp([]store.Cell{{Ts: 1, Value: bigValue(2, 3000)}}, []int{0})
	answer := resp.b
	download := func(subject string, sum uint32) func() []byte {
		return func() []byte {
			var e encoder
			e.frame(&frame{kind: frameDownload, id: 7, total: uint64(len(answer)), sum: sum, subject: subject, chunk: answer[:1000]})
			return e.b
		}
	}
	chunkOf := func(f frame, id, seq uint64, b []byte) []byte {
		var e encoder
		e.frame(&frame{kind: frameChunk, id: id, seq: seq, chunk: b})
		return e.b
	}
	good := func(f frame) []byte {
		from := int(f.seq) * 1000
		return chunkOf(f, f.id, f.seq, answer[from:min(from+1000, len(answer))])
	}
	for _, tc := range []struct {
		name  string
		first func() []byte
		chunk func(f frame) []byte
		want  string
		abort bool
	}{
		{"good", download(fakePartSubject, checksum(answer)), good, "", false},
		{"bad checksum", download(fakePartSubject, checksum(answer)+1), good, "checksum", false},
		{"wrong part", download(fakePartSubject, checksum(answer)), func(f frame) []byte {
			return chunkOf(f, f.id, f.seq+1, answer[1000:2000])
		}, "got part 2 of download 7, want part 1", true},
		{"wrong download", download(fakePartSubject, checksum(answer)), func(f frame) []byte {
			return chunkOf(f, 8, f.seq, answer[1000:2000])
		}, "got part 1 of download 8", true},
		{"overrun", download(fakePartSubject, checksum(answer)), func(f frame) []byte {
			return chunkOf(f, f.id, f.seq, make([]byte, 5000))
		}, "overruns", true},
		{"foreign subject", download("elsewhere.part.x", checksum(answer)), good, "part subject", false},
		{"not a download", func() []byte {
			var e encoder
			e.frame(&frame{kind: frameAck, id: 7, seq: 1, maxChunk: 10, subject: fakePartSubject})
			return e.b
		}, good, "ack frame where a response was due", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeService(t, connect(t, ns), tc.first, tc.chunk)
			c, err := NewStore(connect(t, ns), &ClientOptions{SubjectPrefix: "fake"})
			if err != nil {
				t.Fatal(err)
			}
			cells, err := c.ReadRow(bg, "t", []byte("r"), cols, nil)
			if tc.want == "" {
				if err != nil || len(cells) != 1 || !bytes.Equal(cells[0].Value, bigValue(2, 3000)) {
					t.Fatalf("ReadRow: %d cells, %v", len(cells), err)
				}
				return
			}
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ReadRow") {
				t.Fatalf("ReadRow: %v; want a protocol error naming ReadRow and saying %q", err, tc.want)
			}
			if tc.abort {
				select {
				case id := <-fs.aborts:
					if id != 7 {
						t.Errorf("aborted download %d, want 7", id)
					}
				case <-time.After(30 * time.Second): // a hang guard
					t.Error("the client did not abort the download")
				}
			}
		})
	}

	// A service that acknowledges the wrong part: the client stops and
	// aborts the upload.
	fs := newFakeService(t, connect(t, ns), func() []byte {
		var e encoder
		e.frame(&frame{kind: frameAck, id: 9, seq: 2, maxChunk: 1 << 20, subject: fakePartSubject})
		return e.b
	}, func(frame) []byte { return nil })
	c, err := NewStore(connect(t, ns), &ClientOptions{SubjectPrefix: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: col("f", "v"), Ts: 1, Value: bigValue(3, 2_000_000)}}})
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "asks for part 2, want 1") || !strings.Contains(err.Error(), "Apply") {
		t.Fatalf("Apply with a wrong ack: %v", err)
	}
	select {
	case id := <-fs.aborts:
		if id != 9 {
			t.Errorf("aborted upload %d, want 9", id)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Error("the client did not abort the upload")
	}
}
