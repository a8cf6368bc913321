package main

import (
	"github.com/tikv/client-go/v2/metrics"

	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/sicheck"
)

// figures count the faults a run injected.
type figures struct {
	clientCrashes, ownerCrashes, takeovers, clientKills, pauses, gcRounds atomic.Int64
	// pausesPassed counts the pauses in process and on TiKV whose
	// collections passed the transaction the paused client was running.
	pausesPassed atomic.Int64
	// crashesBefore and crashesAfter split tikv-native's commit crashes:
	// the request not sent, or sent and its answer lost.
	crashesBefore, crashesAfter atomic.Int64
	// readsBelow counts tikv-native's reads answered below the safe
	// point a collection set out to reach (see native).
	readsBelow atomic.Int64
	// prewritesBelow counts tikv-native's prewrites sent below that safe
	// point (see Result.PrewritesBelow).
	prewritesBelow, commitsBelow atomic.Int64
	// commitsAt is client-go's count of commits by mode when the run
	// began (tikv-native: every client's commits count there).
	commitsAt metrics.TxnCommitCounter
}

// enough reports whether every fault cfg's mode injects happened at least
// cfg.MinFaults times: pauses in every mode; in processes, client kills
// and takeovers; else commit crashes and collections, and owner crashes
// in process (a TiKV cluster has no owner). On tikv-native a commit
// crash must have come both before a request and after it, and the
// collections of a pause must have passed the paused client's
// transaction (the lease check is tested only then).
func (f *figures) enough(cfg Config, processes bool) bool {
	n := int64(cfg.MinFaults)
	short := func(every time.Duration, c *atomic.Int64) bool { return every > 0 && c.Load() < n }
	if short(cfg.PauseEvery, &f.pauses) {
		return false
	}
	if processes {
		return !short(cfg.KillEvery, &f.clientKills) && !short(cfg.OwnerCrashEvery, &f.takeovers)
	}
	if cfg.CrashOneIn > 0 && f.clientCrashes.Load() < n || short(cfg.GCEvery, &f.gcRounds) {
		return false
	}
	switch cfg.Mode {
	case modeInProcess:
		return !short(cfg.OwnerCrashEvery, &f.ownerCrashes)
	case modeTiKVNative:
		return !short(cfg.PauseEvery, &f.pausesPassed) &&
			(cfg.CrashOneIn == 0 || f.crashesBefore.Load() >= n && f.crashesAfter.Load() >= n)
	}
	return true
}

// awaitFaults waits, once the run's time is up, until enough faults
// happened (see enough), checking every 50ms, for at most nine times the
// run's duration more; it returns false if they did not.
func awaitFaults(ctx context.Context, cfg Config, f *figures, processes bool) bool {
	limit := time.Now().Add(9 * cfg.Duration)
	for !f.enough(cfg, processes) {
		if time.Now().After(limit) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

func (f *figures) fill(r *Result) {
	r.ClientCrashes = int(f.clientCrashes.Load())
	r.OwnerCrashes = int(f.ownerCrashes.Load())
	r.Takeovers = int(f.takeovers.Load())
	r.ClientKills = int(f.clientKills.Load())
	r.Pauses = int(f.pauses.Load())
	r.PausesPassed = int(f.pausesPassed.Load())
	r.GCRounds = int(f.gcRounds.Load())
	r.CrashesBefore = int(f.crashesBefore.Load())
	r.CrashesAfter = int(f.crashesAfter.Load())
	r.ReadsBelow = int(f.readsBelow.Load())
	r.PrewritesBelow = int(f.prewritesBelow.Load())
	r.CommitsBelow = int(f.commitsBelow.Load())
	r.CommitModes = metrics.GetTxnCommitCounter().Sub(f.commitsAt)
}

// Result is what a run did and what the check found.
type Result struct {
	// Mode is the run's mode (Config.Mode).
	Mode    string
	Report  *sicheck.Report
	Elapsed time.Duration
	// ClientCrashes counts commits stopped by an injected crash (a
	// client process dying at a commit step); ClientKills client
	// processes killed with SIGKILL; OwnerCrashes owners killed (in
	// process: their store reopened from what was synced), Takeovers the
	// times a joined runner took the store over; Pauses clients frozen
	// past their liveness TTL while a collection passed them; GCRounds
	// the collections that ran.
	ClientCrashes, ClientKills, OwnerCrashes, Takeovers, Pauses, GCRounds int
	// PausesPassed counts the pauses (in process and on TiKV) whose
	// collections passed the transaction the paused client was running.
	PausesPassed int
	// BankTransfers and BankReads count the bank's committed transfers
	// and checked snapshots.
	BankTransfers, BankReads int
	// CrashesBefore and CrashesAfter split ClientCrashes on tikv-native:
	// a prewrite or commit not sent, or sent and its answer lost.
	// ReadsBelow counts its reads answered below the safe point a
	// collection set out to reach (a paused client's, mostly): each must
	// fail its transaction, or the run finds an anomaly.
	CrashesBefore, CrashesAfter, ReadsBelow int
	// PrewritesBelow counts tikv-native's prewrites sent below that safe
	// point (a paused client's whose reads were done, resumed), and
	// CommitsBelow the transactions that committed after one, each an
	// anomaly: TiKV does not check prewrites against the safe point, so
	// on a cluster a collection may have dropped a deletion newer than
	// the transaction's snapshot, which its prewrite then no longer
	// conflicts with (the mock drops nothing, so the history would not
	// show it). The engine checks its lease after the prewrites, before
	// the commit point, so that such a transaction fails.
	PrewritesBelow, CommitsBelow int
	// CommitModes counts tikv-native's commits by how TiKV committed them
	// (client-go's counters): two-phase, asynchronous, one-phase.
	CommitModes metrics.TxnCommitCounter
}

func (r *Result) String() string {
	var b strings.Builder
	rep := r.Report
	fmt.Fprintf(&b, "%d list-append transactions in %v (%d ok, %d failed, %d unknown; %d taken as committed)\n",
		rep.Txns, r.Elapsed.Round(time.Millisecond), rep.OK, rep.Failed, rep.Unknown, rep.Committed)
	fmt.Fprintf(&b, "dependencies: ww %d, wr %d, rw %d, rt %d\n", rep.Edges["ww"], rep.Edges["wr"], rep.Edges["rw"], rep.Edges["rt"])
	fmt.Fprintf(&b, "bank: %d transfers, %d snapshots checked\n", r.BankTransfers, r.BankReads)
	passed := ""
	if r.Mode != modeProcesses {
		passed = fmt.Sprintf(" (%d passed mid-transaction)", r.PausesPassed)
	}
	fmt.Fprintf(&b, "faults: %d commit crashes, %d client kills, %d owner kills, %d takeovers, %d pauses past the liveness TTL%s, %d collections\n",
		r.ClientCrashes, r.ClientKills, r.OwnerCrashes, r.Takeovers, r.Pauses, passed, r.GCRounds)
	if r.Mode == modeTiKVNative {
		fmt.Fprintf(&b, "tikv-native: %d commit crashes before the request, %d after it; below a collection's safe point: %d reads answered (their transactions must fail), %d prewrites sent (%d of their transactions committed)\n",
			r.CrashesBefore, r.CrashesAfter, r.ReadsBelow, r.PrewritesBelow, r.CommitsBelow)
		fmt.Fprintf(&b, "tikv-native commits: %d two-phase, %d async commit, %d one-phase\n", r.CommitModes.TwoPC, r.CommitModes.AsyncCommit, r.CommitModes.OnePC)
	}
	if rep.Valid() {
		b.WriteString("no anomaly: every history could have run under snapshot isolation\n")
		return b.String()
	}
	fmt.Fprintf(&b, "%d ANOMALIES:\n", len(rep.Anomalies))
	for i, a := range rep.Anomalies {
		if i == 20 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(rep.Anomalies)-20)
			break
		}
		b.WriteString("  " + a.String() + "\n")
	}
	return b.String()
}
