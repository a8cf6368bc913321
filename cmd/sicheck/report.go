package main

import (
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
}

// enough reports whether every fault cfg asks for happened at least
// cfg.MinFaults times (the faults its mode has: has).
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
	return cfg.Mode != modeInProcess || !short(cfg.OwnerCrashEvery, &f.ownerCrashes)
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
	r.GCRounds = int(f.gcRounds.Load())
}

// Result is what a run did and what the check found.
type Result struct {
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
	// BankTransfers and BankReads count the bank's committed transfers
	// and checked snapshots.
	BankTransfers, BankReads int
}

func (r *Result) String() string {
	var b strings.Builder
	rep := r.Report
	fmt.Fprintf(&b, "%d list-append transactions in %v (%d ok, %d failed, %d unknown; %d taken as committed)\n",
		rep.Txns, r.Elapsed.Round(time.Millisecond), rep.OK, rep.Failed, rep.Unknown, rep.Committed)
	fmt.Fprintf(&b, "dependencies: ww %d, wr %d, rw %d, rt %d\n", rep.Edges["ww"], rep.Edges["wr"], rep.Edges["rw"], rep.Edges["rt"])
	fmt.Fprintf(&b, "bank: %d transfers, %d snapshots checked\n", r.BankTransfers, r.BankReads)
	fmt.Fprintf(&b, "faults: %d commit crashes, %d client kills, %d owner kills, %d takeovers, %d pauses past the liveness TTL, %d collections\n",
		r.ClientCrashes, r.ClientKills, r.OwnerCrashes, r.Takeovers, r.Pauses, r.GCRounds)
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
