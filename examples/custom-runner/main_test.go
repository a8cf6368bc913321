package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/runner"
)

// TestCustomRunner runs this binary's registry in a runner (embedded NATS on
// a random port, store in a temporary directory), writes notes, waits until
// idle and checks what the observer computed.
func TestCustomRunner(t *testing.T) {
	reg, err := newRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, HTTPAddr: "off"}
	r, err := runner.Start(ctx, cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx) }()

	mux := http.NewServeMux()
	mountNotes(mux, r.DB())
	serve := func(method, path, body string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	put := func(row, v string) {
		t.Helper()
		if code, body := serve("PUT", "/notes?id="+row, v); code != http.StatusNoContent {
			t.Fatalf("PUT /notes?id=%s = %d %s", row, code, body)
		}
	}
	put("n1", "hello")
	put("n2", "world")
	put("n3", "bye")
	if _, err := runner.Wait(ctx, r.Node(), runner.WaitOptions{Poll: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	put("n3", "")
	put("n1", "hello again")
	if _, err := runner.Wait(ctx, r.Node(), runner.WaitOptions{Poll: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	code, body := serve("GET", "/notes", "")
	want := "n1\tshout\t\"HELLO AGAIN\"\nn1\ttext\t\"hello again\"\nn2\tshout\t\"WORLD\"\nn2\ttext\t\"world\"\nnotes\t2\n"
	if code != 200 || body != want {
		t.Fatalf("GET /notes = %d\n%s\nwant\n%s", code, body, want)
	}
	if code, body := serve("GET", "/", ""); code != 200 || !strings.Contains(body, "PUT /notes?id=ID") {
		t.Errorf("GET / = %d %q: it does not say how to feed notes in", code, body)
	}
	if code, _ := serve("PUT", "/notes", "x"); code != http.StatusBadRequest {
		t.Errorf("PUT /notes without an id = %d, want 400", code)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFlags: the program reads its flags and their environment
// variables, says what it takes on -help, refuses what it does not take,
// and by default keeps off a web index runner's directory and port.
func TestFlags(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	cfg, err := parseConfigTo(nil, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir == "data" || strings.HasSuffix(cfg.HTTPAddr, ":8080") || cfg.NATSPort == 0 {
		t.Errorf("defaults %q %q NATS port %d: a runner's directory, HTTP port or NATS port", cfg.DataDir, cfg.HTTPAddr, cfg.NATSPort)
	}
	env := map[string]string{"TRICKLE_DATA_DIR": "/tmp/notes", "TRICKLE_HTTP": "off"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err = parseConfigTo([]string{"-http", "127.0.0.1:0"}, lookup, io.Discard)
	if err != nil || cfg.DataDir != "/tmp/notes" || cfg.HTTPAddr != "127.0.0.1:0" {
		t.Errorf("flags over env: %q %q %v; want /tmp/notes (env) and 127.0.0.1:0 (flag over env)", cfg.DataDir, cfg.HTTPAddr, err)
	}
	var help strings.Builder
	if _, err := parseConfigTo([]string{"-help"}, none, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-data") || !strings.Contains(help.String(), "TRICKLE_DATA_DIR") {
		t.Errorf("-help: %v\n%s", err, help.String())
	}
	if _, err := parseConfigTo([]string{"notes.txt"}, none, io.Discard); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Errorf("an argument: %v, want an error naming it", err)
	}
	env = map[string]string{"TRICKLE_NATS_PORT": "many"}
	if _, err := parseConfigTo(nil, lookup, io.Discard); err == nil || !strings.Contains(err.Error(), "TRICKLE_NATS_PORT") {
		t.Errorf("a bad environment variable: %v, want an error naming it", err)
	}
}
