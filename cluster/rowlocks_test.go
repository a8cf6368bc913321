package cluster

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func newRowLocks(t *testing.T, js jetstream.JetStream, owner string, ttl time.Duration) *RowLocks {
	t.Helper()
	l, err := NewRowLocks(testCtx(t), js, owner, RowLockOptions{TTL: ttl, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func holder(t *testing.T, l *RowLocks, table string, row []byte) string {
	t.Helper()
	h, ok, err := l.Holder(testCtx(t), table, row)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return ""
	}
	return h
}

func TestRowLockExclusive(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	const n = 16
	locks := make([]*RowLocks, n)
	for i := range locks {
		locks[i] = newRowLocks(t, js, "owner-"+string(rune('a'+i)), 30*time.Second)
	}
	// Round 0 races for a never-locked row, round 1 for a released one
	// (whose key then holds a purge marker that Create must overwrite).
	for round := range 2 {
		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			mu       sync.Mutex
			winners  []int
			releases []func()
		)
		for i := range n {
			wg.Go(func() {
				<-start
				rel, ok, err := locks[i].TryLock(ctx, "t", []byte("same row"))
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					winners = append(winners, i)
					releases = append(releases, rel)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners: %v", round, len(winners), winners)
		}
		w := winners[0]
		if h := holder(t, locks[0], "t", []byte("same row")); h != locks[w].owner {
			t.Fatalf("round %d: holder %q, winner %q", round, h, locks[w].owner)
		}
		releases[0]()
		if h := holder(t, locks[0], "t", []byte("same row")); h != "" {
			t.Fatalf("round %d: held by %q after release", round, h)
		}
	}
	var contended, acquired uint64
	for _, l := range locks {
		s := l.Stats()
		contended += s.Contended
		acquired += s.Acquired
		if s.Attempts != 2 || s.Errors != 0 {
			t.Fatalf("stats %+v", s)
		}
	}
	if contended != 2*(n-1) || acquired != 2 {
		t.Fatalf("contended %d, acquired %d", contended, acquired)
	}
}

func TestRowLockReleaseAndReacquire(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	a := newRowLocks(t, js, "a", 30*time.Second)
	b := newRowLocks(t, js, "b", 30*time.Second)
	row := []byte("r1")

	rel, ok, err := a.TryLock(ctx, "t", row)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, ok, _ := a.TryLock(ctx, "t", row); ok {
		t.Fatal("relocked by its own holder: the lock is not reentrant")
	}
	if _, ok, _ := b.TryLock(ctx, "t", row); ok {
		t.Fatal("b took a held lock")
	}
	if _, ok, _ := b.TryLock(ctx, "t2", row); !ok {
		t.Fatal("same row of another table is a different lock")
	}
	rel()
	rel() // idempotent
	if h := holder(t, a, "t", row); h != "" {
		t.Fatalf("held by %q after release", h)
	}
	relB, ok, err := b.TryLock(ctx, "t", row)
	if err != nil || !ok {
		t.Fatal("b could not take a released lock", err)
	}
	rel() // a second call, after b took the row, must not free it
	if h := holder(t, a, "t", row); h != "b" {
		t.Fatalf("holder %q", h)
	}
	relB()
	rel2, ok, err := a.TryLock(ctx, "t", row)
	if err != nil || !ok {
		t.Fatal("a could not re-acquire", err)
	}
	rel2()
	if s := a.Stats(); s.Attempts != 3 || s.Acquired != 2 || s.Contended != 1 || s.Released != 2 || s.Lost != 0 {
		t.Fatalf("a stats %+v", s)
	}
}

func TestRowLockReleaseSparesNewOwner(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	a := newRowLocks(t, js, "a", time.Second)
	b := newRowLocks(t, js, "b", 30*time.Second)
	row := []byte("slow row")

	relA, ok, err := a.TryLock(ctx, "t", row)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	// a works too long: its lock expires and b takes the row.
	awaitGone(t, b.kv, rowKey("t", row), "a's lock expiring")
	if h := holder(t, b, "t", row); h != "" {
		t.Fatalf("expired lock still held by %q", h)
	}
	relB, ok, err := b.TryLock(ctx, "t", row)
	if err != nil || !ok {
		t.Fatal("b could not take an expired lock", err)
	}
	relA()
	if h := holder(t, a, "t", row); h != "b" {
		t.Fatalf("a's late release removed b's lock: holder %q", h)
	}
	if s := a.Stats(); s.Lost != 1 || s.Released != 0 {
		t.Fatalf("a stats %+v", s)
	}
	relB()
}

func TestRowLockDeadHolderExpires(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	dead := newRowLocks(t, js, "dead", time.Second)
	live := newRowLocks(t, js, "live", 30*time.Second)
	row := []byte("r")
	key := rowKey("t", row)
	if _, ok, err := dead.TryLock(ctx, "t", row); err != nil || !ok {
		t.Fatal(ok, err)
	} // never released
	deadLock, err := dead.kv.Get(ctx, key)
	if err != nil && !notFound(err) { // not found: expired already
		t.Fatal(err)
	}
	rel, ok, err := live.TryLock(ctx, "t", row)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		// Only a machine slow enough for the dead holder's lock to
		// expire meanwhile lets live in: then the server's expiry marker
		// came between the two locks.
		liveLock, err := live.kv.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if deadLock != nil && liveLock.Revision() == deadLock.Revision()+1 {
			t.Fatal("took a live lock")
		}
	} else {
		awaitGone(t, live.kv, key, "the dead holder's lock expiring")
		rel, ok, err = live.TryLock(ctx, "t", row)
		if err != nil || !ok {
			t.Fatalf("lock of a dead holder not free after it expired: ok=%v err=%v", ok, err)
		}
	}
	rel()
}

func TestRowLockArbitraryBytes(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	l := newRowLocks(t, js, "o", 30*time.Second)
	cases := []struct {
		table string
		row   []byte
	}{
		{"", nil},
		{"", []byte{}}, // same lock as the one above
		{"t", []byte{0}},
		{"t", []byte{0xff, 0xfe, '.', '*', '>', ' '}},
		{"t.*>", []byte("..")},
		{"ab", []byte("c")},
		{"a", []byte("bc")}, // not the same as ("ab", "c")
		{"ü table", []byte(strings.Repeat("long row ", 2000))},
	}
	keyRe := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for i, c := range cases {
		k := rowKey(c.table, c.row)
		if !keyRe.MatchString(k) {
			t.Fatalf("key %q", k)
		}
		_, ok, err := l.TryLock(ctx, c.table, c.row)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if want := !seen[k]; ok != want {
			t.Fatalf("case %d (%q, %q): ok = %v, want %v", i, c.table, c.row, ok, want)
		}
		seen[k] = true
		if h := holder(t, l, c.table, c.row); h != "o" {
			t.Fatalf("case %d: holder %q", i, h)
		}
	}
	if len(seen) != len(cases)-1 {
		t.Fatalf("%d distinct keys", len(seen))
	}
}

func TestRowLockOptionsValidate(t *testing.T) {
	t.Parallel()
	var o RowLockOptions
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Bucket != "trickle_rowlocks" || o.TTL != 30*time.Second {
		t.Fatalf("defaults %+v", o)
	}
	for _, tc := range []struct {
		o     RowLockOptions
		field string
	}{
		{RowLockOptions{TTL: 100 * time.Millisecond}, "TTL"},
		{RowLockOptions{Bucket: "x y"}, "Bucket"},
		{RowLockOptions{Replicas: -1}, "Replicas"},
		{RowLockOptions{ReleaseTimeout: -1}, "ReleaseTimeout"},
	} {
		tc.o.EnsureDefaults()
		if err := tc.o.Validate(); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
	js := newJS(t)
	if _, err := NewRowLocks(testCtx(t), js, "", RowLockOptions{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("empty owner: %v", err)
	}
}
