package tikv

import (
	"context"
	"fmt"
)

// Oracle is a timestamp oracle served by the cluster's PD, for
// framework.Options.Oracle: PD timestamps have the framework's layout
// (physical milliseconds above 18 logical bits), and with PD as the oracle
// no process of the deployment has to own one.
type Oracle struct{ s *Store }

// Oracle returns the PD-backed timestamp oracle of the store's cluster. It
// is usable until the store is closed.
func (s *Store) Oracle() *Oracle { return &Oracle{s} }

// Timestamp returns a fresh timestamp, greater than every timestamp PD
// served before. It waits at most Options.RequestTimeout.
func (o *Oracle) Timestamp(ctx context.Context) (uint64, error) {
	if err := o.s.acquire(); err != nil {
		return 0, err
	}
	defer o.s.release()
	ctx, cancel := o.s.deadline(ctx)
	defer cancel()
	return o.s.timestamp(ctx)
}

// AdvanceGC lets TiKV collect the versions of its own keys that no read at
// or above safePoint needs, and returns the safe point TiKV now keeps
// (which may be lower, if another client of the cluster holds it back).
// Every write of the store leaves TiKV versions behind (a deleted cell is a
// tombstone, a guard lock a record); call it with the framework's safe
// point (admin.SafePoint) after each framework GC: no row transaction or
// scan of the store reads below that.
func (s *Store) AdvanceGC(ctx context.Context, safePoint uint64) (uint64, error) {
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.release()
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	sp, err := s.kv.GC(ctx, safePoint)
	if err != nil {
		return 0, s.fail(fmt.Sprintf("advancing the GC safe point to %d", safePoint), err)
	}
	return sp, nil
}
