package oracle

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFilePersisterRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "tso")
	f := NewFilePersister(path)
	if top, err := f.Load(); err != nil || top != 0 {
		t.Fatalf("missing file: got %d, %v; want 0, nil", top, err)
	}
	for _, top := range []uint64{1, Compose(t0, 12345), MaxTimestamp} {
		if err := f.Save(top); err != nil {
			t.Fatal(err)
		}
		// A fresh persister reads what is on disk, not a cached value.
		if got, err := NewFilePersister(path).Load(); err != nil || got != top {
			t.Fatalf("got %d, %v; want %d", got, err, top)
		}
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file left behind: %v", err)
	}
}

func TestFilePersisterStaleTempFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tso")
	// Leftover of a crash in the middle of a Save.
	if err := os.WriteFile(path+".tmp", []byte("half-written garbage that is long"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := NewFilePersister(path)
	if err := f.Save(42); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Load(); err != nil || got != 42 {
		t.Fatalf("got %d, %v; want 42", got, err)
	}
}

func TestFilePersisterCorrupt(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := NewFilePersister(good).Save(Compose(t0, 7)); err != nil {
		t.Fatal(err)
	}
	valid, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte { b := append([]byte(nil), valid...); b[i] ^= 0x10; return b }
	cases := map[string][]byte{
		"empty":     {},
		"truncated": valid[:recordLen-1],
		"too-long":  append(append([]byte(nil), valid...), 0),
		"magic":     flip(0),
		"value":     flip(9),
		"checksum":  flip(recordLen - 1),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			top, err := NewFilePersister(path).Load()
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %d, %v; want ErrCorrupt", top, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s", err, path)
			}
			// And a Server refuses to start on it.
			if _, err := NewServer(NewFilePersister(path), &ServerOptions{Logger: quiet}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("NewServer: got %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestFilePersisterUnreadable(t *testing.T) {
	dir := t.TempDir() // a directory cannot be read as a file
	if _, err := NewFilePersister(dir).Load(); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want a read error", err)
	}
}

func TestFilePersisterServerRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tso")
	s1 := newTestServer(t, NewFilePersister(path), nil)
	_, last := hammer(t, 4, 300, 3, s1.Reserve)
	s1.Close()
	s2 := newTestServer(t, NewFilePersister(path), nil)
	if lo, _ := hammer(t, 4, 300, 3, s2.Reserve); lo <= last {
		t.Fatalf("after restart served %d, want > %d", lo, last)
	}
}

func TestMemPersisterFailSaves(t *testing.T) {
	m := NewMemPersister(5)
	boom := errors.New("boom")
	m.FailSaves(boom)
	if err := m.Save(10); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if top, _ := m.Load(); top != 5 || m.Saves() != 0 {
		t.Fatalf("failed Save was recorded: top %d saves %d", top, m.Saves())
	}
	m.FailSaves(nil)
	if err := m.Save(10); err != nil || m.Top() != 10 || m.Saves() != 1 {
		t.Fatalf("got %v, top %d, saves %d", err, m.Top(), m.Saves())
	}
}
