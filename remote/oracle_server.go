package remote

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/oracle"
)

// Endpoint names of the oracle service; the subject of each is
// <prefix>.oracle.<name>.
const (
	oracleReserve = "reserve"
	oracleStats   = "stats"
)

// OracleBackend is what an OracleService serves: the oracle itself, plus
// a counter of the timestamps it has issued, for Stats.
type OracleBackend interface {
	oracle.Reserver
	// Issued returns how many timestamps have been issued so far.
	Issued() uint64
}

// positioner is implemented by backends that can tell their latest
// issued timestamp (oracle.Server does); Stats uses it when present.
type positioner interface{ Position() (last, limit uint64) }

// OracleService serves the timestamp oracle to other processes over NATS.
// The process owning the oracle's persisted state runs it; every other
// process reaches it through an OracleClient, usually wrapped in an
// oracle.Client so that one request per process is in flight.
type OracleService struct {
	srv  *server
	o    OracleBackend
	last atomic.Uint64 // highest timestamp this service handed out
}

// ServeOracle starts a micro service "trickle-oracle" on nc serving o on
// the subjects <prefix>.oracle.{reserve,stats}. Requests are handled one
// at a time by default (ServiceOptions.OracleConcurrency raises it):
// Reserve is a compare-and-swap, and clients coalesce their callers
// anyway. opts may be nil (all defaults); it is copied. An unusable option
// fails with an *OptionError naming the field. It does not own o or nc:
// Stop leaves both open.
// When it returns, the NATS server knows the endpoints (unless the
// connection is down: then they are registered when it reconnects).
func ServeOracle(nc *nats.Conn, o OracleBackend, opts *ServiceOptions) (*OracleService, error) {
	if o == nil {
		return nil, errors.New("remote: ServeOracle: nil backend")
	}
	cfg, err := serviceOptions(opts)
	if err != nil {
		return nil, err
	}
	srv, err := newServer(nc, cfg, "trickle-oracle", "oracle", "trickle timestamp oracle", cfg.OracleConcurrency, false)
	if err != nil {
		return nil, err
	}
	s := &OracleService{srv: srv, o: o}
	grp := srv.svc.AddGroup(cfg.SubjectPrefix + ".oracle")
	if err := srv.endpoint(grp, oracleReserve, s.reserve); err != nil {
		srv.stop()
		return nil, err
	}
	if err := srv.endpoint(grp, oracleStats, s.stats); err != nil {
		srv.stop()
		return nil, err
	}
	srv.ready()
	srv.log.Info("remote: oracle service started", "prefix", cfg.SubjectPrefix, "concurrency", cfg.OracleConcurrency)
	return s, nil
}

// Stop stops serving, answering requests still queued with ErrUnavailable
// and waiting for running ones. It does not close the backend, and is
// idempotent.
func (s *OracleService) Stop() error { return s.srv.stop() }

func (s *OracleService) reserve(ctx context.Context, d *decoder, e *encoder) error {
	n := d.smallUint()
	if err := d.finish(); err != nil {
		return err
	}
	if n < 1 || n > oracle.MaxReserve {
		return fmt.Errorf("%w: %d (must be 1..%d)", oracle.ErrInvalidCount, n, oracle.MaxReserve)
	}
	first, err := s.o.Reserve(ctx, n)
	if err != nil {
		return err
	}
	top := first + uint64(n) - 1
	for cur := s.last.Load(); top > cur && !s.last.CompareAndSwap(cur, top); cur = s.last.Load() {
	}
	e.u8(wireVersion)
	e.u64(first)
	return nil
}

func (s *OracleService) stats(_ context.Context, d *decoder, e *encoder) error {
	if err := d.finish(); err != nil {
		return err
	}
	cur := s.last.Load()
	if p, ok := s.o.(positioner); ok {
		cur, _ = p.Position()
	}
	e.u8(wireVersion)
	e.u64(s.o.Issued())
	e.u64(cur)
	return nil
}
