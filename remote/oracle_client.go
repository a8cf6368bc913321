package remote

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/oracle"
)

// OracleClient reaches an OracleService. It implements oracle.Reserver
// with one request per call; wrap it in oracle.NewClient so that a
// process's concurrent callers share one in-flight request.
type OracleClient struct {
	c                *client
	reserve, statsSj string
}

var _ oracle.Reserver = (*OracleClient)(nil)

// NewOracle returns a client for the oracle service reached through nc
// under the subject prefix of opts. opts may be nil (all defaults); it is
// copied. An unusable option fails with an *OptionError naming the field.
// It does not own nc.
func NewOracle(nc *nats.Conn, opts *ClientOptions) (*OracleClient, error) {
	c, err := newClient(nc, opts, oracleService, oracle.ErrClosed)
	if err != nil {
		return nil, err
	}
	return &OracleClient{
		c:       c,
		reserve: subject(c.cfg.SubjectPrefix, "oracle", oracleReserve),
		statsSj: subject(c.cfg.SubjectPrefix, "oracle", oracleStats),
	}, nil
}

// Reserve returns the first of n consecutive fresh timestamps
// [first, first+n), with the guarantees of the remote oracle. Errors are
// those of oracle.Server (ErrInvalidCount, ErrClosed, ErrExhausted) or of
// the transport (ErrUnavailable, context errors).
func (o *OracleClient) Reserve(ctx context.Context, n int) (uint64, error) {
	if n <= 0 || n > oracle.MaxReserve {
		return 0, fmt.Errorf("%w: %d (must be 1..%d)", oracle.ErrInvalidCount, n, oracle.MaxReserve)
	}
	data, err := o.c.request(ctx, "Reserve", o.reserve, func(e *encoder) { e.uvarint(uint64(n)) })
	if err != nil {
		return 0, err
	}
	d := newDecoder(data)
	d.version()
	first := d.u64()
	if err := d.finish(); err != nil {
		return 0, err
	}
	return first, nil
}

// Stats returns how many timestamps the oracle has issued and its current
// timestamp: the latest it issued if the backend reports it (an
// oracle.Server does, through Position), else the highest timestamp the
// service has handed out (0 before the first). They let tools and
// dashboards watch the oracle without taking a timestamp.
func (o *OracleClient) Stats(ctx context.Context) (issued, current uint64, err error) {
	data, err := o.c.request(ctx, "Stats", o.statsSj, func(*encoder) {})
	if err != nil {
		return 0, 0, err
	}
	d := newDecoder(data)
	d.version()
	issued, current = d.u64(), d.u64()
	if err := d.finish(); err != nil {
		return 0, 0, err
	}
	return issued, current, nil
}

// Close makes later calls fail with oracle.ErrClosed. It does not close
// nc, and is idempotent.
func (o *OracleClient) Close() error { return o.c.close() }
