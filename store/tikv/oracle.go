package tikv

import "context"

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
