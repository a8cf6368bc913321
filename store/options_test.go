package store_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

func TestOptionsDefaults(t *testing.T) {
	shared := map[string]string{"lock": "meta"}
	o := store.Options{Groups: shared}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.FS != vfs.Default || o.Logger == nil || o.CacheSize != store.DefaultCacheSize || o.MemTableSize != store.DefaultMemTableSize || o.Durability != store.DurabilitySynced {
		t.Fatalf("defaults not filled: %+v", o)
	}
	if len(o.Groups) != 1 || o.Groups["lock"] != "meta" {
		t.Fatalf("groups = %v: the store places no family by itself", o.Groups)
	}
	o.Groups["other"] = "x"
	if _, ok := shared["other"]; ok {
		t.Fatal("the options' Groups map is the caller's: changing one changes the other")
	}
}

func TestOptionsValidate(t *testing.T) {
	valid := func() store.Options {
		o := store.Options{}
		o.EnsureDefaults()
		return o
	}
	tests := map[string]func(*store.Options){
		"nil FS":         func(o *store.Options) { o.FS = nil },
		"nil Logger":     func(o *store.Options) { o.Logger = nil },
		"negative cache": func(o *store.Options) { o.CacheSize = -1 },
		"memtable 4 GiB": func(o *store.Options) { o.MemTableSize = 4 << 30 },
		"memtable < 0":   func(o *store.Options) { o.MemTableSize = -1 },
		"bad durability": func(o *store.Options) { o.Durability = 7 },
		"empty family":   func(o *store.Options) { o.Groups[""] = "x" },
		"empty group":    func(o *store.Options) { o.Groups["f"] = "" },
		"too many groups": func(o *store.Options) {
			for i := range 300 {
				o.Groups[string(rune('a'+i))] = string(rune('a' + i))
			}
		},
	}
	for name, mutate := range tests {
		o := valid()
		mutate(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, o)
		}
	}
	var zero store.Options
	if err := zero.Validate(); err == nil {
		t.Error("Validate accepted zero options without EnsureDefaults")
	}
}

// TestReopen checks persistence across Close/Open on the same filesystem,
// for both durability modes (a clean Close syncs NoSync writes).
func TestReopen(t *testing.T) {
	for _, d := range []store.Durability{store.DurabilitySynced, store.DurabilityNone} {
		t.Run(d.String(), func(t *testing.T) {
			fs := vfs.NewMem()
			opts := &store.Options{FS: fs, Logger: quietLogger, Durability: d, Groups: map[string]string{sideFamily: sideGroup}}
			db, err := store.Open("db", opts)
			if err != nil {
				t.Fatal(err)
			}
			put(t, db, "t", []byte("r"), col("f", "q"), 7, "seven")
			if _, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("r"), NoSync: true,
				Mutations: []store.Mutation{{Column: col(sideFamily, "f:q"), Ts: 7}}}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openMem(t, opts)
			got, err := db.ReadRow(ctx, "t", []byte("r"), []store.Column{col("f", "q")}, nil)
			if err != nil || len(got) != 1 || string(got[0].Value) != "seven" {
				t.Fatalf("after reopen: %q %v", cellsString(got), err)
			}
			n := mustCollect(t, db, store.ScanRequest{Table: "t", Group: sideGroup})
			if len(n) != 1 {
				t.Fatalf("notify cells after reopen: %q", cellsString(n))
			}
		})
	}
}

// TestReopenDisk uses a real directory with the default (synced) options.
func TestReopenDisk(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir, &store.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, "t", []byte("r"), col("f", "q"), 1, "v")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(dir, &store.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if tables, err := db.Tables(ctx, ""); err != nil || len(tables) != 1 || tables[0] != "t" {
		t.Fatalf("Tables after reopen: %q %v", tables, err)
	}
}

func TestGroupLayoutMismatch(t *testing.T) {
	fs := vfs.NewMem()
	open := func(groups map[string]string) (*store.DB, error) {
		return store.Open("db", &store.Options{FS: fs, Logger: quietLogger, Groups: groups})
	}
	db, err := open(map[string]string{"lock": "meta", "write": "meta", sideFamily: sideGroup})
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, "t", []byte("r"), col("lock", ""), 1, "locked")
	db.Close()

	for name, groups := range map[string]map[string]string{
		"moved to default":       {"write": "meta", sideFamily: sideGroup},
		"moved to another":       {"lock": "other", "write": "meta", sideFamily: sideGroup},
		"side moved":             {"lock": "meta", "write": "meta", sideFamily: "meta"},
		"side left out":          {"lock": "meta", "write": "meta"},
		"explicitly default now": {"lock": store.DefaultGroup, "write": "meta", sideFamily: sideGroup},
	} {
		_, err := open(groups)
		if !errors.Is(err, store.ErrGroupLayout) {
			t.Errorf("%s: Open err = %v, want ErrGroupLayout", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "family") {
			t.Errorf("%s: error does not name the family: %v", name, err)
		}
	}

	// Adding a new group keeps existing ids: "a-new" sorts before "meta" but
	// must not take its id, or the lock cell would vanish.
	db, err = open(map[string]string{"lock": "meta", "write": "meta", "data": "a-new", sideFamily: sideGroup})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.ReadRow(ctx, "t", []byte("r"), []store.Column{col("lock", "")}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("lock cell after adding a group: %q %v", cellsString(got), err)
	}
	metaByte, _ := store.GroupByte(db, "meta")
	newByte, _ := store.GroupByte(db, "a-new")
	if metaByte != 2 || newByte != 4 { // meta and side came first, a-new after
		t.Fatalf("group bytes meta=%d a-new=%d, want 2 and 4", metaByte, newByte)
	}
	db.Close()
	// The added family is now persisted too.
	if _, err := open(map[string]string{"lock": "meta", "write": "meta"}); !errors.Is(err, store.ErrGroupLayout) {
		t.Fatalf("dropping the new family: err = %v", err)
	}
}

func TestClosed(t *testing.T) {
	db, err := store.Open("db", memOptions(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, "t", []byte("r"), col("f", ""), 1, "v")
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("r")}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Apply after Close: %v", err)
	}
	if _, err := db.ReadRow(ctx, "t", []byte("r"), []store.Column{col("f", "")}, nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("ReadRow after Close: %v", err)
	}
	if _, err := collect(t, db.Scan(ctx, store.ScanRequest{Table: "t"})); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Scan after Close: %v", err)
	}
	if _, err := db.Tables(ctx, ""); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Tables after Close: %v", err)
	}
}

// TestCloseDuringScan closes the store while a scan is being consumed: Close
// waits for the scan, and operations issued inside the scan loop after Close
// began fail with ErrClosed instead of deadlocking.
func TestCloseDuringScan(t *testing.T) {
	db, err := store.Open("db", memOptions(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	for r := range 10 {
		put(t, db, "t", []byte{byte(r)}, col("f", ""), 1, "v")
	}
	closed := make(chan error)
	n := 0
	for _, err := range db.Scan(ctx, store.ScanRequest{Table: "t"}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 1 {
			go func() { closed <- db.Close() }()
			for { // wait until Close has started refusing new operations
				if _, err := db.Tables(ctx, ""); errors.Is(err, store.ErrClosed) {
					break
				}
			}
		}
	}
	if n != 10 {
		t.Fatalf("scan yielded %d cells, want 10", n)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestGroupLayoutNewFamily maps a family to a new group on a later Open: this
// is allowed (the store can't cheaply tell whether the family has cells in the
// default group) and the new placement is persisted from then on.
func TestGroupLayoutNewFamily(t *testing.T) {
	fs := vfs.NewMem()
	db, err := store.Open("db", &store.Options{FS: fs, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = store.Open("db", &store.Options{FS: fs, Logger: quietLogger, Groups: map[string]string{"lock": "meta"}})
	if err != nil {
		t.Fatalf("mapping a new family: %v", err)
	}
	db.Close()
	if _, err := store.Open("db", &store.Options{FS: fs, Logger: quietLogger}); !errors.Is(err, store.ErrGroupLayout) {
		t.Fatalf("unmapping it again: err = %v", err)
	}
}
