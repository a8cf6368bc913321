package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for sicheck: the processes mode
// starts it with SICHECK_MAIN set and the node or client command.
func TestMain(m *testing.M) {
	if os.Getenv("SICHECK_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// soakFor runs cfg (the defaults, changed by tweak) and fails the test if
// the history is not valid or no fault happened.
func soakFor(t *testing.T, tweak func(*Config)) *Result {
	t.Helper()
	cfg := defaults()
	cfg.Duration = 3 * time.Second
	cfg.Logger = quiet
	cfg.MinFaults = 1 // a loaded machine runs long enough to see each
	tweak(&cfg)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	res, err := soak(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if !res.Report.Valid() {
		t.Fatalf("anomalies:\n%s", res)
	}
	if res.Report.OK == 0 || res.BankReads == 0 {
		t.Fatalf("nothing was checked:\n%s", res)
	}
	return res
}

// In one process, one- and two-phase commits race while clients crash at
// commit steps, the owner's store is killed (reopened from what it had
// synced) and clients pause past their liveness while collections pass
// them.
func TestSnapshotIsolationInProcess(t *testing.T) {
	res := soakFor(t, func(c *Config) {
		c.OwnerCrashEvery, c.PauseEvery = 700*time.Millisecond, 600*time.Millisecond
	})
	if res.ClientCrashes == 0 || res.OwnerCrashes == 0 || res.Pauses == 0 || res.GCRounds == 0 {
		t.Fatalf("a fault did not happen:\n%s", res)
	}
}

// On client-go's mock TiKV cluster, one region and four.
func TestSnapshotIsolationOnTiKV(t *testing.T) {
	for _, regions := range []int{1, 4} {
		t.Run(strings.Repeat("I", regions), func(t *testing.T) {
			res := soakFor(t, func(c *Config) {
				c.Mode, c.Regions, c.Duration, c.PauseEvery = modeTiKV, regions, 2*time.Second, 600*time.Millisecond
			})
			if res.ClientCrashes == 0 || res.Pauses == 0 || res.GCRounds == 0 {
				t.Fatalf("a fault did not happen:\n%s", res)
			}
		})
	}
}

// On client-go's mock TiKV cluster running its own transactions (the
// engine framework.Open runs on a TiKV store), one region and four: each
// client process has a TiKV client of its own and dies at prewrite and
// commit requests, before or after them, and pauses past its lease at a
// read while collections pass it.
func TestSnapshotIsolationOnTiKVNative(t *testing.T) {
	for _, regions := range []int{1, 4} {
		t.Run(strings.Repeat("I", regions), func(t *testing.T) {
			res := soakFor(t, func(c *Config) {
				c.Mode, c.Regions, c.Duration, c.PauseEvery = modeTiKVNative, regions, 2*time.Second, 500*time.Millisecond
			})
			if res.CrashesBefore == 0 || res.CrashesAfter == 0 || res.PausesPassed == 0 || res.GCRounds == 0 {
				t.Fatalf("a fault did not happen:\n%s", res)
			}
			if m := res.CommitModes; m.TwoPC == 0 || m.AsyncCommit+m.OnePC == 0 {
				t.Fatalf("a commit mode did not run:\n%s", res)
			}
		})
	}
}

// Runners and clients as processes over NATS: clients killed with
// SIGKILL and stopped past their liveness with SIGSTOP, the owner killed
// and its store taken over by the runner that joined it.
func TestSnapshotIsolationInProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes for about 20s")
	}
	res := soakFor(t, func(c *Config) {
		c.Mode, c.Duration, c.Clients, c.BankClients = modeProcesses, 14*time.Second, 3, 1
		c.KillEvery, c.OwnerCrashEvery, c.PauseEvery = 2*time.Second, 5*time.Second, 4*time.Second
		c.GCEvery, c.GCLag = time.Second, 100*time.Millisecond
	})
	if res.ClientKills == 0 || res.Takeovers == 0 || res.Pauses == 0 {
		t.Fatalf("a fault did not happen:\n%s", res)
	}
}

// The check can fail: a store that answers some reads from an older
// snapshot (a broken engine) is caught.
func TestABrokenStoreIsCaught(t *testing.T) {
	cfg := defaults()
	cfg.Duration, cfg.Logger, cfg.staleReads = 2*time.Second, quiet, true
	cfg.OwnerCrashEvery, cfg.PauseEvery, cfg.CrashOneIn = 0, 0, 0
	res, err := soak(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.Valid() {
		t.Fatalf("a store answering stale reads went unnoticed:\n%s", res)
	}
	t.Logf("caught: %d anomalies, the first: %s", len(res.Report.Anomalies), res.Report.Anomalies[0])
}

// The check of tikv-native can fail: clients that hold no lease and do
// not adopt the safe point when they resume go on reading below a
// collection's safe point after a pause, and are caught.
func TestANativeEngineWithoutLeaseIsCaught(t *testing.T) {
	cfg := defaults()
	cfg.Mode, cfg.Duration, cfg.Logger, cfg.noLease = modeTiKVNative, time.Second, quiet, true
	cfg.PauseEvery, cfg.CrashOneIn, cfg.MinFaults = 200*time.Millisecond, 0, 5
	cfg.Keys = 1000 // few conflicts, which would run a caught transaction again
	res, err := soak(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.Valid() {
		t.Fatalf("transactions reading below the safe point went unnoticed:\n%s", res)
	}
	kinds := map[string]int{}
	for _, a := range res.Report.Anomalies {
		kinds[a.Kind]++
	}
	t.Logf("caught: %d anomalies %v, the first: %s", len(res.Report.Anomalies), kinds, res.Report.Anomalies[0])
}

// Bad flags are errors naming them, with exit code 2.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-mode", "x"}, {"-clients", "0"}, {"-keys", "-1"}, {"extra"}, {"check"}} {
		var out, errs bytes.Buffer
		if code := run(args, &out, &errs); code != 2 || errs.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs.String())
		}
	}
}
