package tikvengine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// TestStrongWriteNotifiesOnce: a write of a strongly observed column
// leaves one notification, named by its writer; other writes none.
func TestStrongWriteNotifiesOnce(t *testing.T) {
	db, _ := open(t, nil)
	var ts uint64
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		ts = tx.StartTs()
		for _, v := range []string{"1", "2"} { // twice in one transaction
			if err := tx.Set("t", []byte("r"), strong, []byte(v)); err != nil {
				return err
			}
		}
		return tx.Set("t", []byte("r"), colA, []byte("not observed"))
	})
	ns := find(t, db)
	if len(ns) != 1 || string(ns[0].Row) != "r" || ns[0].Column != strong {
		t.Fatalf("Find = %v, want t/r/%s once", ns, strong)
	}
	p := pending(t, db, "r", strong)
	if p == nil || len(p.Versions) != 1 || p.Versions[0] != ts {
		t.Fatalf("Pending = %+v, want one version at the writer's start %d", p, ts)
	}
	// A second writer: a second version, still found once.
	ts2 := set(t, db, "r", strong, "3")
	if ns := find(t, db); len(ns) != 1 {
		t.Errorf("Find after two writers = %v, want the cell once", ns)
	}
	if p := pending(t, db, "r", strong); p == nil || len(p.Versions) != 2 || p.Versions[0] != ts2 || p.Versions[1] != ts {
		t.Errorf("Pending = %+v, want versions %d, %d (newest first)", p, ts2, ts)
	}
	if p := pending(t, db, "r", colA); p != nil {
		t.Errorf("an unobserved column has pending %+v", p)
	}
	// A delete notifies too.
	update(t, db, func(ctx context.Context, tx engine.Txn) error { return tx.Delete("t", []byte("d"), strong) })
	if p := pending(t, db, "d", strong); p == nil || len(p.Versions) != 1 {
		t.Errorf("Pending after a delete = %+v, want one version", p)
	}
}

// run is an observer's run for n as the runtime makes it: Pending, then
// (if anything is pending) a transaction that claims and, if changed,
// writes.
func run(t testing.TB, db *tikvengine.DB, n engine.Notification, during func()) (changed bool, p *engine.Pending, runTs uint64) {
	t.Helper()
	p, err := db.Pending(bg, n)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		return false, nil, 0
	}
	changed, runTs = runWith(t, db, p, during)
	return changed, p, runTs
}

// runWith is the transaction of a run for p.
func runWith(t testing.TB, db *tikvengine.DB, p *engine.Pending, during func()) (changed bool, runTs uint64) {
	t.Helper()
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		runTs = tx.StartTs()
		var err error
		if changed, err = db.Claim(ctx, tx, "obs", engine.Strong, p); err != nil || !changed {
			return err
		}
		if during != nil {
			during()
		}
		return tx.Set("t", p.Row, colB, []byte("observed"))
	})
	return changed, runTs
}

// TestClaimSettle: a run claims a change once; a write while it runs
// keeps its notification and makes the next run claim again.
func TestClaimSettle(t *testing.T) {
	db, _ := open(t, nil)
	n := engine.Notification{Table: "t", Row: []byte("r"), Column: strong}
	set(t, db, "r", strong, "1")
	changed, p, runTs := run(t, db, n, func() { set(t, db, "r", strong, "2") })
	if !changed {
		t.Fatal("the first run saw no change")
	}
	s, err := db.Settle(bg, p, runTs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Removed != 1 || s.Kept != 0 {
		t.Errorf("Settle = %+v, want the run's one version removed", s)
	}
	p2 := pending(t, db, "r", strong)
	if p2 == nil || len(p2.Versions) != 1 || p2.Versions[0] <= runTs {
		t.Fatalf("after Settle: pending %+v, want only the write made during the run", p2)
	}
	// The next run sees the write made during the first.
	changed, p, runTs = run(t, db, n, nil)
	if !changed {
		t.Fatal("the write during the first run was not claimed")
	}
	if s, err := db.Settle(bg, p, runTs); err != nil || s.Removed != 1 {
		t.Fatalf("Settle = %+v, %v", s, err)
	}
	if p := pending(t, db, "r", strong); p != nil {
		t.Fatalf("pending %+v after all is settled", p)
	}
	if ns := find(t, db); len(ns) != 0 {
		t.Errorf("Find = %v after all is settled", ns)
	}
	// A run with nothing new claims nothing.
	if changed, _, _ := run(t, db, n, nil); changed {
		t.Error("a run claimed a change already claimed")
	}
}

// TestSettleKeepsLaterWriters: settling for a run whose snapshot is older
// than some of the notifications read keeps those.
func TestSettleKeepsLaterWriters(t *testing.T) {
	db, _ := open(t, nil)
	n := engine.Notification{Table: "t", Row: []byte("r"), Column: strong}
	set(t, db, "r", strong, "1")
	var runTs uint64
	update(t, db, func(_ context.Context, tx engine.Txn) error { runTs = tx.StartTs(); return nil })
	set(t, db, "r", strong, "2")
	p := pending(t, db, "r", strong) // read after the "run"
	s, err := db.Settle(bg, p, runTs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Removed != 1 || s.Kept != 1 {
		t.Errorf("Settle = %+v, want 1 removed and 1 kept", s)
	}
	if p := pending(t, db, "r", strong); p == nil || len(p.Versions) != 1 || p.Versions[0] < runTs {
		t.Errorf("left %+v, want the later writer's", p)
	}
	_ = n
}

// TestConcurrentClaims: two runs for one change that both claim it from
// snapshots taken before either commits: one commits, the other
// conflicts on the ack and, run again, sees the change claimed.
func TestConcurrentClaims(t *testing.T) {
	db, _ := open(t, nil)
	set(t, db, "r", strong, "1")
	p := pending(t, db, "r", strong)
	var claimed sync.WaitGroup
	claimed.Add(2)
	var mu sync.Mutex
	var results []string
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			attempt := 0
			err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
				attempt++
				changed, err := db.Claim(ctx, tx, "obs", engine.Strong, p)
				if err != nil {
					return err
				}
				if attempt == 1 {
					claimed.Done()
					claimed.Wait()
				}
				mu.Lock()
				results = append(results, fmt.Sprintf("%d:%v", attempt, changed))
				mu.Unlock()
				if !changed {
					return nil
				}
				return tx.Set("t", []byte("r"), colB, fmt.Appendf(nil, "run %d", i))
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	count := map[string]int{}
	for _, r := range results {
		count[r]++
	}
	// Both claim at their first attempt; the loser's second sees the
	// winner's ack.
	if count["1:true"] != 2 || count["2:false"] != 1 || len(results) != 3 {
		t.Errorf("runs = %v, want two first attempts that claimed and one retry that did not", results)
	}
}

// TestClaimOfDeletedCell: a deleted cell's change is claimed through its
// notifications.
func TestClaimOfDeletedCell(t *testing.T) {
	db, _ := open(t, nil)
	n := engine.Notification{Table: "t", Row: []byte("r"), Column: strong}
	set(t, db, "r", strong, "1")
	if changed, p, runTs := run(t, db, n, nil); !changed {
		t.Fatal("no change claimed")
	} else if _, err := db.Settle(bg, p, runTs); err != nil {
		t.Fatal(err)
	}
	update(t, db, func(ctx context.Context, tx engine.Txn) error { return tx.Delete("t", []byte("r"), strong) })
	changed, p, runTs := run(t, db, n, nil)
	if !changed {
		t.Fatal("the delete was not claimed")
	}
	if _, err := db.Settle(bg, p, runTs); err != nil {
		t.Fatal(err)
	}
	// A second run for the same delete (one that read it pending before
	// the first committed) claims nothing.
	update(t, db, func(ctx context.Context, tx engine.Txn) error { return tx.Delete("t", []byte("r"), strong) })
	p = pending(t, db, "r", strong)
	if changed, _ := runWith(t, db, p, nil); !changed {
		t.Fatal("the second delete was not claimed")
	}
	if changed, _ := runWith(t, db, p, nil); changed {
		t.Error("a delete was claimed twice")
	}
}

func TestDiscard(t *testing.T) {
	db, _ := open(t, nil)
	set(t, db, "r", strong, "1")
	set(t, db, "r", strong, "2")
	p := pending(t, db, "r", strong)
	if err := db.Discard(bg, p); err != nil {
		t.Fatal(err)
	}
	if p := pending(t, db, "r", strong); p != nil {
		t.Errorf("pending %+v after Discard", p)
	}
}

func TestNotifyWeak(t *testing.T) {
	db, _ := open(t, nil)
	for _, col := range []store.Column{strong, colA} {
		if err := db.NotifyWeak(bg, "t", []byte("r"), col); !errors.Is(err, engine.ErrNotWeak) {
			t.Errorf("NotifyWeak of %s: %v, want ErrNotWeak", col, err)
		}
		err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
			return tx.NotifyWeak("t", []byte("r"), col)
		})
		if !errors.Is(err, engine.ErrNotWeak) {
			t.Errorf("NotifyWeak of %s in a transaction: %v, want ErrNotWeak", col, err)
		}
	}
	if ns := find(t, db); len(ns) != 0 {
		t.Fatalf("refused notifications were written: %v", ns)
	}
	if err := db.NotifyWeak(bg, "t", []byte("a"), weak); err != nil {
		t.Fatal(err)
	}
	update(t, db, func(ctx context.Context, tx engine.Txn) error { return tx.NotifyWeak("t", []byte("b"), weak) })
	// Writing a weak column notifies nobody.
	set(t, db, "c", weak, "v")
	ns := find(t, db)
	if len(ns) != 2 || string(ns[0].Row) != "a" || string(ns[1].Row) != "b" || ns[0].Column != weak {
		t.Errorf("Find = %v, want t/a and t/b of %s", ns, weak)
	}
}

// TestFindReadsNotificationsOnly: Find's requests stay in the
// notification range, however much data the table has, and it yields a
// cell with many notifications once.
func TestFindReadsNotificationsOnly(t *testing.T) {
	db, c := open(t, nil)
	for i := range 20 {
		update(t, db, func(ctx context.Context, tx engine.Txn) error {
			for j := range 10 {
				if err := tx.Set("t", fmt.Appendf(nil, "r%02d", j), colA, []byte("data")); err != nil {
					return err
				}
			}
			return tx.Set("t", fmt.Appendf(nil, "r%02d", i%3), strong, []byte("v"))
		})
	}
	var mu sync.Mutex
	var scans []*tikvrpc.Request
	kv := c.Client(t, func(inner tikvclient.Client) tikvclient.Client {
		return &recording{Client: inner, record: func(r *tikvrpc.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.Type == tikvrpc.CmdScan {
				scans = append(scans, r)
			}
		}}
	})
	db2, err := tikvengine.New(kv, &tikvengine.Options{Store: db.Store(), ScanBatchSize: 4,
		Observed: observed{strong: engine.Strong}})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for n, err := range db2.Find(bg, "t", nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, string(n.Row))
	}
	if fmt.Sprint(rows) != "[r00 r01 r02]" {
		t.Errorf("Find = %v, want r00 r01 r02 once each", rows)
	}
	notifyRange := append([]byte(tikvengine.DefaultNamespace+"\x00"), 0x02)
	if len(scans) == 0 {
		t.Fatal("Find sent no scan")
	}
	for _, r := range scans {
		s := r.Scan()
		if !bytes.HasPrefix(s.StartKey, notifyRange) || (len(s.EndKey) > 0 && bytes.Compare(s.EndKey, []byte(tikvengine.DefaultNamespace+"\x00\x03")) > 0) {
			t.Errorf("Find scanned [%q, %q), outside the notification range", s.StartKey, s.EndKey)
		}
		if !s.KeyOnly {
			t.Errorf("Find read values: %+v", s)
		}
	}
	t.Logf("Find: %d scans for 20 notifications of 3 cells (batch 4)", len(scans))
}

// recording is a TiKV client that shows each request to record.
type recording struct {
	tikvclient.Client
	record func(*tikvrpc.Request)
}

func (r *recording) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	r.record(req)
	return r.Client.SendRequest(ctx, addr, req, timeout)
}

// TestARunSettlesWithItsCommit: a run's transaction removes the
// notifications it claimed for with its commit, so Settle has nothing left
// to write; a run that fails removes nothing.
func TestARunSettlesWithItsCommit(t *testing.T) {
	db, c := open(t, nil)
	set(t, db, "r", strong, "1")
	set(t, db, "r", strong, "2")
	p := pending(t, db, "r", strong)
	failed := errors.New("observer failed")
	err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		if _, err := db.Claim(ctx, tx, "obs", engine.Weak, p); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("failing run: %v", err)
	}
	if p2 := pending(t, db, "r", strong); p2 == nil || len(p2.Versions) != 2 {
		t.Fatalf("after a failed run: pending %+v, want both versions", p2)
	}
	changed, runTs := runWith(t, db, p, nil)
	if !changed {
		t.Fatal("no change claimed")
	}
	if p2 := pending(t, db, "r", strong); p2 != nil {
		t.Fatalf("after a committed run: pending %+v, want none", p2)
	}
	rpcs := c.RPCs()
	if s, err := db.Settle(bg, p, runTs); err != nil || s.Removed != 2 || s.Kept != 0 {
		t.Fatalf("Settle = %+v, %v; want both removed", s, err)
	}
	if n := c.RPCs() - rpcs; n != 0 {
		t.Errorf("Settle after the run settled sent %d requests", n)
	}
}

// TestPendingOfOwnCommitsSendsNothing: Pending of a cell this DB's own
// commits notified answers from what the commits left, without a request;
// a key another process wrote is not in it and stays for a later pass,
// whose run then finds the change claimed.
func TestPendingOfOwnCommitsSendsNothing(t *testing.T) {
	db, c := open(t, nil)
	other := openOn(t, c, nil)
	n := engine.Notification{Table: "t", Row: []byte("r"), Column: strong}
	ts1 := set(t, db, "r", strong, "1")
	ts2 := set(t, db, "r", strong, "2")
	rpcs := c.RPCs()
	p, err := db.Pending(bg, n)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.RPCs() - rpcs; n != 0 {
		t.Errorf("Pending of the DB's own commits sent %d requests", n)
	}
	if p == nil || len(p.Versions) != 2 || p.Versions[0] != ts2 || p.Versions[1] != ts1 {
		t.Fatalf("Pending = %+v, want versions %d, %d", p, ts2, ts1)
	}
	// Another process's write of the same cell, before this run.
	set(t, other, "r", strong, "3")
	changed, runTs := runWith(t, db, p, nil)
	if !changed {
		t.Fatal("no change claimed")
	}
	if s, err := db.Settle(bg, p, runTs); err != nil || s.Removed != 2 {
		t.Fatalf("Settle = %+v, %v", s, err)
	}
	left, err := db.Pending(bg, n)
	if err != nil || left == nil || len(left.Versions) != 1 {
		t.Fatalf("after the run: pending %+v, %v; want the other process's write", left, err)
	}
	if changed, _ := runWith(t, db, left, nil); changed {
		t.Error("the other process's write, which the first run saw, was claimed again")
	}
	if p := pending(t, db, "r", strong); p != nil {
		t.Errorf("pending %+v after both runs", p)
	}
}

// TestAWeakRunWhoseNotificationsAnotherRunSettledIsSkipped: a process
// whose Pending came from its own commits, while another runner ran the
// observer and settled the notifications, skips the run at Claim: the
// other run saw every write they announced.
func TestAWeakRunWhoseNotificationsAnotherRunSettledIsSkipped(t *testing.T) {
	db, c := open(t, nil)
	other := openOn(t, c, nil)
	n := engine.Notification{Table: "t", Row: []byte("r"), Column: weak}
	update(t, db, func(ctx context.Context, tx engine.Txn) error { return tx.NotifyWeak("t", []byte("r"), weak) })
	// The other runner takes the work: it reads TiKV, runs, settles.
	po, err := other.Pending(bg, n)
	if err != nil || po == nil {
		t.Fatalf("the other runner's Pending: %+v, %v", po, err)
	}
	claim := func(d *tikvengine.DB, p *engine.Pending) (changed bool) {
		update(t, d, func(ctx context.Context, tx engine.Txn) error {
			var err error
			changed, err = d.Claim(ctx, tx, "obs", engine.Weak, p)
			return err
		})
		return changed
	}
	if !claim(other, po) {
		t.Fatal("the other runner's run was skipped")
	}
	// This process still knows its commit's notification.
	p, err := db.Pending(bg, n)
	if err != nil || p == nil {
		t.Fatalf("Pending from the process's own commit: %+v, %v", p, err)
	}
	if claim(db, p) {
		t.Error("a weak run went ahead for notifications another run had settled")
	}
}

// Finding work does not wait for, or resolve, the lock of a writer that
// has not finished committing (its TTL has not run out): it yields the
// cell as one that may have work, and finds the notification committed
// once it is.
func TestFindPassesOverAWriterStillCommitting(t *testing.T) {
	c := tikvtest.New(t, nil)
	prewritten, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	kv := c.Client(t, func(inner tikvclient.Client) tikvclient.Client {
		return &recording{Client: inner, record: func(r *tikvrpc.Request) {
			if r.Type == tikvrpc.CmdCommit {
				once.Do(func() { close(prewritten); <-release })
			}
		}}
	})
	writer := openClient(t, c, kv, &tikvengine.Options{Disable1PC: true, DisableAsyncCommit: true})
	done := make(chan error, 1)
	go func() {
		done <- writer.Transact(bg, engine.TxnOptions{}, func(_ context.Context, tx engine.Txn) error {
			return tx.Set("t", []byte("r"), strong, []byte("v"))
		})
	}()
	<-prewritten
	finder := openClient(t, c, c.Client(t, nil), nil) // a fresh client: Find reads at a fresh timestamp, above the writer's
	before := c.RPCsByType()
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	var yielded []engine.Notification
	for n, err := range finder.Find(ctx, "t", nil, nil) {
		if err != nil {
			t.Fatalf("Find beside a writer still committing: %v", err)
		}
		yielded = append(yielded, n)
	}
	// The lock check yields the locked cell as one that may have work.
	if len(yielded) != 1 || string(yielded[0].Row) != "r" {
		t.Errorf("Find beside a writer still committing yielded %v, want r (locked) once", yielded)
	}
	after := c.RPCsByType()
	for _, typ := range []string{"CheckTxnStatus", "ResolveLock", "CheckSecondaryLocks"} {
		if after[typ] != before[typ] {
			t.Errorf("Find sent %s (%d) for the writer's lock", typ, after[typ]-before[typ])
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := find(t, finder); len(got) != 1 || string(got[0].Row) != "r" {
		t.Fatalf("after the commit Find = %v, want the notification of r", got)
	}
}

// dropping is a TiKV client that fails the requests drop picks, as if
// they were lost on the way (context.Canceled, which client-go neither
// retries nor takes for a store that is down).
type dropping struct {
	tikvclient.Client
	drop func(*tikvrpc.Request) bool
}

func (d *dropping) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	if d.drop(req) {
		return nil, context.Canceled
	}
	return d.Client.SendRequest(ctx, addr, req, timeout)
}

// TestACommittedNotificationWhoseSecondaryCommitWasLostIsFound: a writer
// whose primary committed but whose notification key (a secondary, in
// another region) never got its commit leaves a lock there; Find, which
// reads committed notifications, still yields the cell, and once the
// lock is older than its TTL Find resolves it (the primary says
// committed) so that the run sees the write.
func TestACommittedNotificationWhoseSecondaryCommitWasLostIsFound(t *testing.T) {
	c := tikvtest.New(t, &tikvtest.Options{SplitKeys: [][]byte{[]byte(tikvengine.DefaultNamespace + "\x00\x02")}})
	notifyRange := []byte(tikvengine.DefaultNamespace + "\x00\x02")
	kv := c.Client(t, func(inner tikvclient.Client) tikvclient.Client {
		return &dropping{Client: inner, drop: func(r *tikvrpc.Request) bool {
			// The notification's commit is lost; the primary's (the data
			// key, first in key order) goes through.
			return r.Type == tikvrpc.CmdCommit && slices.ContainsFunc(r.Commit().Keys, func(k []byte) bool { return bytes.HasPrefix(k, notifyRange) })
		}}
	})
	writer := openClient(t, c, kv, &tikvengine.Options{Disable1PC: true, DisableAsyncCommit: true})
	if err := writer.Transact(bg, engine.TxnOptions{}, func(_ context.Context, tx engine.Txn) error {
		return tx.Set("t", []byte("r"), strong, []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, writer, 0, "r", strong); !ok || v != "v" {
		t.Fatalf("the write reads %q, %v: its primary did not commit", v, ok)
	}
	finder := openClient(t, c, c.Client(t, nil), &tikvengine.Options{LockCheckInterval: time.Nanosecond})
	if got := find(t, finder); len(got) != 1 || string(got[0].Row) != "r" {
		t.Fatalf("Find beside a committed write's lost secondary = %v, want the notification of r", got)
	}
	c.AdvanceClock(time.Minute) // past the lock's TTL
	tikvengine.ForgetRecent(finder)
	find(t, finder)
	p, err := finder.Pending(bg, engine.Notification{Table: "t", Row: []byte("r"), Column: strong})
	if err != nil {
		t.Fatal(err)
	}
	if p == nil || len(p.Versions) != 1 {
		t.Fatalf("once the lock expired and Find passed, Pending = %+v, want the write's version", p)
	}
}
