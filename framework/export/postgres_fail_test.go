package export_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework/export"
)

// stallingProxy forwards TCP connections to a server until stalled: then
// it forwards nothing more, either way, and answers no new connection,
// as a server that hangs or a network that drops packets does.
type stallingProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	stall  bool
	resume chan struct{} // closed when the stall ends
	conns  []net.Conn
}

func newStallingProxy(t *testing.T, target string) *stallingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingProxy{l: l, target: target, resume: make(chan struct{})}
	t.Cleanup(p.close)
	go p.serve()
	return p
}

func (p *stallingProxy) addr() string { return p.l.Addr().String() }

func (p *stallingProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go p.forward(c)
	}
}

// forward copies between c and a connection to the target, holding the
// bytes back while stalled.
func (p *stallingProxy) forward(c net.Conn) {
	p.gate()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, s)
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.gate()
				if _, err := dst.Write(buf[:n]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		dst.Close()
		src.Close()
	}
	go pipe(s, c)
	pipe(c, s)
}

// gate waits while the proxy is stalled.
func (p *stallingProxy) gate() {
	p.mu.Lock()
	stall, resume := p.stall, p.resume
	p.mu.Unlock()
	if stall {
		<-resume
	}
}

func (p *stallingProxy) setStall(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on && !p.stall {
		p.resume = make(chan struct{})
	}
	if !on && p.stall {
		close(p.resume)
	}
	p.stall = on
}

func (p *stallingProxy) close() {
	p.setStall(false)
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// A server that accepts connections but never answers fails the sink's
// start within ConnectTimeout, with an error naming its address.
func TestPostgresServerThatDoesNotAnswer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }() // reads the handshake, never answers
		}
	}()
	began := time.Now()
	_, err = export.NewPostgresSink(context.Background(), "postgres://trickle@"+l.Addr().String()+"/db?sslmode=disable",
		export.PostgresOptions{ConnectTimeout: 300 * time.Millisecond, Timeout: time.Second})
	took := time.Since(began)
	var pe *export.PostgresError
	if !errors.As(err, &pe) || pe.Addr != l.Addr().String() || pe.Timeout == 0 || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("a server that does not answer: %v; want a PostgresError naming %s and the timeout", err, l.Addr())
	}
	if took > 3*time.Second {
		t.Fatalf("failing took %v, beyond the 300ms connect timeout and the 1s timeout", took)
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
}

// A server that stops answering while the queue drains (a stalled
// network): each batch fails within Timeout, the failure is listed naming
// the server, every entry stays queued, and once it answers again the
// queue drains into it.
func TestPostgresServerStallsMidExport(t *testing.T) {
	srv := sharedServer(t)
	proxy := newStallingProxy(t, srv.Host())
	dsn := "postgres://postgres@" + proxy.addr() + "/postgres?sslmode=disable"
	sink := newPostgresSink(t, dsn, export.PostgresOptions{Table: "stalled", Timeout: 400 * time.Millisecond, ConnectTimeout: 200 * time.Millisecond})
	q, env := startQueue(t, 2, 10, sink)
	first := putAll(t, env, q, 30, func(i int) string { return "before" })
	wait(t, env)
	equalRows(t, live(t, srv.DSN(), "stalled"), first)

	proxy.setStall(true)
	want := putAll(t, env, q, 40, func(i int) string { return "after" })
	msg := waitForFailure(t, env, q, proxy.addr(), "table stalled", "no answer within")
	if n := queued(t, env, q); n != 40 {
		t.Fatalf("%d entries queued while the server does not answer, want 40", n)
	}
	equalRows(t, live(t, srv.DSN(), "stalled"), first)
	t.Logf("listed: %s", msg)
	proxy.setStall(false)
	drained(t, env, q)
	equalRows(t, live(t, srv.DSN(), "stalled"), want)
}

// Options are checked: a bad table name is refused naming it, and an
// existing table of other columns is refused naming the column.
func TestPostgresOptionsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		opts export.PostgresOptions
		says string
	}{
		{export.PostgresOptions{Table: "Upper"}, `"Upper"`},
		{export.PostgresOptions{Table: "a;drop table x"}, `"a;drop table x"`},
		{export.PostgresOptions{Table: "1st"}, `"1st"`},
		{export.PostgresOptions{Table: "a.b.c"}, `"a.b.c"`},
		{export.PostgresOptions{Table: strings.Repeat("t", 60), DeleteRows: true}, "at most 55 bytes"},
		{export.PostgresOptions{Values: "xml"}, "Values"},
		{export.PostgresOptions{MaxConns: -1}, "MaxConns"},
		{export.PostgresOptions{Timeout: -time.Second}, "Timeout"},
	} {
		_, err := export.NewPostgresSink(context.Background(), "postgres://127.0.0.1:1/db", tc.opts)
		if !errors.Is(err, export.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want ErrInvalidOptions saying %s", tc.opts, err, tc.says)
		}
	}
	dsn := sharedServer(t).DSN()
	exec(t, dsn, "CREATE TABLE other (key text PRIMARY KEY, value text, seq bigint, deleted boolean, updated_at timestamptz)")
	_, err := export.NewPostgresSink(context.Background(), dsn, export.PostgresOptions{Table: "other", Logger: pgQuiet})
	if !errors.Is(err, export.ErrInvalidOptions) || !strings.Contains(err.Error(), "other") || !strings.Contains(err.Error(), "value") {
		t.Fatalf("a table with a text value column: %v, want ErrInvalidOptions naming the table and the column", err)
	}
	exec(t, dsn, "CREATE SCHEMA app")
	s := newPostgresSink(t, dsn, export.PostgresOptions{Table: "app.docs", Values: export.JSONB})
	if err := s.Export(context.Background(), "q", []export.Entry{{Key: []byte("k"), Seq: 1, Value: []byte("not json")}}); !errors.Is(err, export.ErrInvalidEntry) {
		t.Fatalf("a value that is not JSON into jsonb: %v, want ErrInvalidEntry", err)
	}
	if err := s.Export(context.Background(), "q", []export.Entry{{Key: []byte("a\x00b"), Seq: 1, Value: []byte("1")}}); !errors.Is(err, export.ErrInvalidEntry) {
		t.Fatalf("a key with a zero byte: %v, want ErrInvalidEntry", err)
	}
}
