package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

// TestOpenOtherComparer checks that a pebble database written with another
// comparer (here pebble's default, which the store used before it split keys
// into column and timestamp) is refused with ErrIncompatible and a message
// naming both comparers, and that the store's own database is refused by a
// pebble opened with the default comparer.
func TestOpenOtherComparer(t *testing.T) {
	fs := vfs.NewMem()
	pdb, err := pebble.Open("old", &pebble.Options{FS: fs, Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pdb.Set([]byte("\x01t\x00\x01"), []byte("v"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open("old", memOptions(fs))
	if err == nil {
		db.Close()
		t.Fatal("Open accepted a database written with the default comparer")
	}
	if !errors.Is(err, store.ErrIncompatible) || !strings.Contains(err.Error(), pebble.DefaultComparer.Name) ||
		!strings.Contains(err.Error(), store.ComparerName) {
		t.Fatalf("Open err = %v, want ErrIncompatible naming both comparers", err)
	}
	t.Log(err)

	db = openMemAt(t, fs, "new")
	put(t, db, "t", []byte("r"), col("f", "q"), 1, "v")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if pdb, err := pebble.Open("new", &pebble.Options{FS: fs, Logger: quietPebble{}}); err == nil {
		pdb.Close()
		t.Fatal("pebble with the default comparer opened the store's database")
	} else if !strings.Contains(err.Error(), store.ComparerName) {
		t.Fatalf("pebble.Open err = %v, want it to name %q", err, store.ComparerName)
	}
	// The store itself still opens it.
	db = openMemAt(t, fs, "new")
	got, err := db.ReadRow(ctx, "t", []byte("r"), []store.Column{col("f", "q")}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("after reopen: %q %v", cellsString(got), err)
	}
}

// openMemAt opens the store in dir on fs; the test closes it unless the
// caller did.
func openMemAt(t *testing.T, fs vfs.FS, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(dir, memOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// quietPebble drops pebble's log lines.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic("pebble: " + fmt.Sprintf(format, args...))
}
