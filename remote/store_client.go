package remote

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/store"
)

// StoreClient is a store.Store whose operations run on a StoreService in
// another process, so that runners, loaders and tools can share the one
// process that owns the pebble store. Results and errors are those of the
// store behind the service; transport failures come back as ErrUnavailable,
// ErrBusy or ErrTooLarge, and context errors as themselves (errors.Is).
// Row transactions and answers larger than the NATS max payload travel in
// parts, so cells of many megabytes work through any NATS server.
//
// A Scan is fetched in pages as the caller consumes it. Unlike a local
// Scan, which reads one snapshot, each page reads its own snapshot: rows
// written behind the scan's position while it runs may or may not appear.
type StoreClient struct {
	c                                                                                                      *client
	apply, applyAll, ingest, readRow, readRows, readNow, applyNow, applyAtomic, scan, tablesSj, identitySj string
	// nowOffUntil is when, in Unix nanoseconds, ReadRowsNow and ApplyNow
	// ask the service again after it was found unable to draw timestamps;
	// atomicOffUntil the same for ApplyAtomic.
	nowOffUntil, atomicOffUntil atomic.Int64
}

var (
	_ store.Store            = (*StoreClient)(nil)
	_ store.AtomicApplier    = (*StoreClient)(nil)
	_ store.Ingester         = (*StoreClient)(nil)
	_ store.TimestampReader  = (*StoreClient)(nil)
	_ store.TimestampApplier = (*StoreClient)(nil)
	_ store.TimestampChooser = (*StoreClient)(nil)
)

// NewStore returns a client for the store service reached through nc
// under the subject prefix of opts. opts may be nil (all defaults); it is
// copied. An unusable option fails with an *OptionError naming the field.
// It does not own nc: Close leaves it open. No request is sent until the
// first operation.
func NewStore(nc *nats.Conn, opts *ClientOptions) (*StoreClient, error) {
	c, err := newClient(nc, opts, storeService, store.ErrClosed)
	if err != nil {
		return nil, err
	}
	return &StoreClient{
		c:           c,
		apply:       subject(c.cfg.SubjectPrefix, "store", storeApply),
		applyAll:    subject(c.cfg.SubjectPrefix, "store", storeApplyAll),
		ingest:      subject(c.cfg.SubjectPrefix, "store", storeIngest),
		readRow:     subject(c.cfg.SubjectPrefix, "store", storeReadRow),
		readRows:    subject(c.cfg.SubjectPrefix, "store", storeReadRows),
		readNow:     subject(c.cfg.SubjectPrefix, "store", storeReadNow),
		applyNow:    subject(c.cfg.SubjectPrefix, "store", storeApplyNow),
		applyAtomic: subject(c.cfg.SubjectPrefix, "store", storeApplyAtomic),
		scan:        subject(c.cfg.SubjectPrefix, "store", storeScan),
		tablesSj:    subject(c.cfg.SubjectPrefix, "store", storeTables),
		identitySj:  subject(c.cfg.SubjectPrefix, "store", storeIdentity),
	}, nil
}

// Apply executes txn atomically on the remote store. If the request is lost
// (ErrUnavailable after sending, or a timeout), the txn may or may not have
// been applied, as with a local Apply interrupted by a crash.
func (s *StoreClient) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	res := store.RowResult{FailedCheck: -1}
	if txn == nil {
		return res, &store.InvalidError{Op: "Apply", Field: "txn", Reason: "nil"}
	}
	data, err := s.c.request(ctx, "Apply", s.apply, func(e *encoder) { e.applyReq(txn) })
	if err != nil {
		return res, err
	}
	d := newDecoder(data)
	r := d.applyResp()
	if err := d.finish(); err != nil {
		return res, err
	}
	return r, nil
}

// ApplyAll executes several row transactions on the remote store in one
// request and one answer; see store.Store. The service runs them with one
// call of its store (for the pebble store: one batch, at most one sync).
// A request larger than a NATS message travels in parts. If the request
// is lost, each row transaction may or may not have been applied.
// Validation errors are the store's (txns[2].Checks[0]); an empty call
// returns no results without a request. The faults a request cannot carry
// or that need no store to see (more than store.MaxApplyAll row
// transactions, a nil one) are reported here, in the store's order and
// words, without a request.
func (s *StoreClient) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	if len(txns) > store.MaxApplyAll {
		return nil, &store.InvalidError{Op: "ApplyAll", Field: "txns",
			Reason: fmt.Sprintf("%d row transactions, more than MaxApplyAll (%d)", len(txns), store.MaxApplyAll)}
	}
	for i, txn := range txns {
		if txn == nil {
			return nil, &store.InvalidError{Op: "ApplyAll", Field: fmt.Sprintf("txns[%d]", i), Reason: "nil"}
		}
	}
	if len(txns) == 0 {
		return nil, nil
	}
	data, err := s.c.request(ctx, "ApplyAll", s.applyAll, func(e *encoder) { e.applyAllReq(txns) })
	if err != nil {
		return nil, err
	}
	d := newDecoder(data)
	results := d.applyAllResp(len(txns))
	if err := d.finish(); err != nil {
		return nil, err
	}
	return results, nil
}

// Ingest writes row transactions of plain writes into the remote store as
// sorted sstables linked into its LSM (see store.DB.Ingest): the fast way
// to load data nobody else writes, such as a bulk import of committed
// versions. The call is one request, in parts when larger than a NATS
// message, and the service makes one call of its store: all of txns are
// written, or none. A service whose store cannot ingest, or one from
// before this call, refuses it with an error matching
// errors.ErrUnsupported, having written nothing; the caller then writes
// with ApplyAll. If the answer is lost, the rows may or may not have been
// written. Validation errors are the store's (txns[2].Mutations[0]); an
// empty call sends nothing.
func (s *StoreClient) Ingest(ctx context.Context, txns []*store.RowTxn) error {
	for i, txn := range txns {
		if txn == nil {
			return &store.InvalidError{Op: "Ingest", Field: fmt.Sprintf("txns[%d]", i), Reason: "nil"}
		}
	}
	if len(txns) == 0 {
		return nil
	}
	data, err := s.c.request(ctx, "Ingest", s.ingest, func(e *encoder) { e.applyAllReq(txns) })
	if errors.Is(err, nats.ErrNoResponders) && s.c.nc.IsConnected() {
		// Nothing listens on the subject while the connection is up: a
		// service from before Ingest (or none, which ApplyAll reports).
		err = fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	if err != nil {
		return err
	}
	d := newDecoder(data)
	d.version()
	return d.finish()
}

// ReadRow reads the versions of cols that spans select from one row; see
// store.Store. An answer larger than a NATS message comes in parts, up to
// the client's ClientOptions.MaxBufferedBytes.
func (s *StoreClient) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	data, err := s.c.request(ctx, "ReadRow", s.readRow, func(e *encoder) { e.readRowReq(table, row, cols, spans) })
	if err != nil {
		return nil, err
	}
	d := newDecoder(data)
	cells := d.readRowResp(row, cols)
	if err := d.finish(); err != nil {
		return nil, err
	}
	return cells, nil
}

// ReadRows reads several rows, each as ReadRow would, in one request and
// one answer: N rows cost one round trip instead of N. The service reads
// them with one call of its store, so from one snapshot if that store
// reads them so (the pebble store does). Request and answer larger than a
// NATS message travel in parts, the answer up to the client's
// ClientOptions.MaxBufferedBytes. Validation errors are the store's
// (reads[3].Columns[0]); an empty call returns no results without a
// request. See store.Store.
func (s *StoreClient) ReadRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	if len(reads) == 0 {
		return nil, nil
	}
	data, err := s.c.request(ctx, "ReadRows", s.readRows, func(e *encoder) { e.readRowsReq(reads) })
	if err != nil {
		return nil, err
	}
	d := newDecoder(data)
	results := d.readRowsResp(reads)
	if err := d.finish(); err != nil {
		return nil, err
	}
	return results, nil
}

// nowRetry is how long a StoreClient answers ReadRowsNow itself with
// errors.ErrUnsupported after the service could not serve one: a service
// started without an oracle, or one older than the call, costs its callers
// a round trip a minute instead of one per transaction, and a service that
// gains the ability is used within a minute.
const nowRetry = time.Minute

// ReadRowsNow is ReadRows at a timestamp the service draws from its oracle
// (ServiceOptions.Oracle) while it serves the request, returned with the
// results. Bit j of rel marks span j of every read as relative: the
// timestamp is added to its MaxTs. It is how a read-only transaction
// over a remote store gets its snapshot and its first read in one round
// trip: the timestamp is later than every commit the caller saw before
// calling, as one from the oracle would be.
//
// A service that cannot draw timestamps (no oracle, or a version that
// lacks the call) fails it with an error matching errors.ErrUnsupported,
// after which the client fails further calls the same way, without a
// request, for a minute; the caller then draws a timestamp from the oracle
// and calls ReadRows. No responder on the call's subject counts as such a
// service (the error matches ErrUnavailable too): the caller's fallback to
// the oracle then tells whether anything serves the deployment. A service
// that times out or fails otherwise fails the call as every request does.
func (s *StoreClient) ReadRowsNow(ctx context.Context, reads []store.RowRead, rel uint64) (uint64, [][]store.Cell, error) {
	if len(reads) == 0 {
		return 0, nil, &store.InvalidError{Op: "ReadRowsNow", Field: "reads", Reason: "empty: a read is needed to carry the timestamp"}
	}
	data, err := s.requestNow(ctx, "ReadRowsNow", s.readNow, &s.nowOffUntil, func(e *encoder) {
		e.readRowsReq(reads)
		e.uvarint(rel)
	})
	if err != nil {
		return 0, nil, err
	}
	d := newDecoder(data)
	results := d.readRowsResp(reads)
	ts := d.u64()
	if err := d.finish(); err != nil {
		return 0, nil, err
	}
	return ts, results, nil
}

// ApplyNow is Apply with the timestamps of some mutations drawn by the
// service from its oracle (ServiceOptions.Oracle) while it serves the
// request: bit i of rel adds the timestamp to Mutations[i].Ts. It returns
// the timestamp with the result. It is how a transaction's commit point
// gets its commit timestamp without a round trip to the oracle: the
// timestamp is later than everything the caller did before calling. A
// service that cannot draw timestamps fails it as ReadRowsNow does
// (errors.ErrUnsupported), without applying anything. If the answer is
// lost, the row transaction may or may not have been applied, at a
// timestamp the caller does not know.
func (s *StoreClient) ApplyNow(ctx context.Context, txn *store.RowTxn, rel uint64) (uint64, store.RowResult, error) {
	res := store.RowResult{FailedCheck: -1}
	if txn == nil {
		return 0, res, &store.InvalidError{Op: "ApplyNow", Field: "txn", Reason: "nil"}
	}
	data, err := s.requestNow(ctx, "ApplyNow", s.applyNow, &s.nowOffUntil, func(e *encoder) {
		e.applyReq(txn)
		e.uvarint(rel)
	})
	if err != nil {
		return 0, res, err
	}
	d := newDecoder(data)
	r := d.applyResp()
	ts := d.u64()
	if err := d.finish(); err != nil {
		return 0, res, err
	}
	return ts, r, nil
}

// ApplyAtomic writes txns, on distinct rows, all or none at a commit
// timestamp the service draws from its oracle (ServiceOptions.Oracle)
// while its store writes them: store.DB.ApplyAtomic, whose results it
// returns with the timestamp. clock is not used: the timestamp must come
// from the oracle beside the store, which readers of the store draw
// their snapshots from. One round trip commits a whole transaction that
// fits (see the percolator's one-phase commit). The call is validated
// here as the store validates it (store.ValidateApplyAtomic) before
// anything is sent.
//
// A service that cannot (no oracle, a store that cannot, or a version
// that lacks the call) fails it with an error matching
// errors.ErrUnsupported, having applied nothing, after which the client
// fails further calls the same way, without a request, for a minute. If
// the answer is lost (a timeout), the outcome is unknown.
func (s *StoreClient) ApplyAtomic(ctx context.Context, txns []*store.RowTxn, rel []int, _ store.Clock) (uint64, []store.RowResult, error) {
	if err := store.ValidateApplyAtomic(txns, rel); err != nil {
		return 0, nil, err
	}
	data, err := s.requestNow(ctx, "ApplyAtomic", s.applyAtomic, &s.atomicOffUntil, func(e *encoder) {
		e.applyAllReq(txns)
		for _, n := range rel {
			e.uvarint(uint64(n))
		}
	})
	if err != nil {
		return 0, nil, err
	}
	d := newDecoder(data)
	results := d.applyAllResp(len(txns))
	ts := d.u64()
	if err := d.finish(); err != nil {
		return 0, nil, err
	}
	return ts, results, nil
}

// ChoosesTimestamps reports whether ReadRowsNow and ApplyNow are worth
// calling: false for a minute after the service was found unable to draw
// timestamps, so that callers go the usual way without trying.
func (s *StoreClient) ChoosesTimestamps() bool {
	until := s.nowOffUntil.Load()
	return until == 0 || time.Now().UnixNano() >= until
}

// requestNow sends a request of a call whose timestamp the service draws
// (ReadRowsNow, ApplyNow, ApplyAtomic), unless the service was found
// unable to serve it within nowRetry (off: when to ask again); see
// ReadRowsNow.
func (s *StoreClient) requestNow(ctx context.Context, op, subj string, off *atomic.Int64, body func(*encoder)) ([]byte, error) {
	if until := off.Load(); until != 0 && time.Now().UnixNano() < until {
		return nil, fmt.Errorf("remote: %s: the store service could not serve it within the last %v: %w", op, nowRetry, errors.ErrUnsupported)
	}
	data, err := s.c.request(ctx, op, subj, body)
	if errors.Is(err, nats.ErrNoResponders) && s.c.nc.IsConnected() {
		// Nothing listens on the call's subject while the connection is
		// up: a service from before the call, or none at all, which the
		// caller's fallback to the oracle reports.
		err = fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	if errors.Is(err, errors.ErrUnsupported) {
		off.Store(time.Now().Add(nowRetry).UnixNano())
	}
	return data, err
}

// Tables lists the tables with at least one cell in group.
func (s *StoreClient) Tables(ctx context.Context, group string) ([]string, error) {
	data, err := s.c.request(ctx, "Tables", s.tablesSj, func(e *encoder) { e.str(group) })
	if err != nil {
		return nil, err
	}
	d := newDecoder(data)
	tables := d.tablesResp()
	if err := d.finish(); err != nil {
		return nil, err
	}
	return tables, nil
}

// Scan returns the cells req selects in key order, a page at a time.
//
// A page (see ClientOptions.ScanPageCells) is fetched only when the
// consumer has taken every cell of the previous one; a consumer that stops
// early costs no more requests. The first error ends the sequence.
func (s *StoreClient) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	return func(yield func(store.Cell, error) bool) {
		r := scanReq{req: req, maxCells: s.c.cfg.ScanPageCells}
		for {
			page, err := s.scanPage(ctx, &r)
			if err != nil {
				yield(store.Cell{}, err)
				return
			}
			for _, c := range page.cells {
				if !yield(c, nil) {
					return
				}
			}
			if !page.more {
				return
			}
			last := &page.cells[len(page.cells)-1]
			r.req.After = &store.Position{Row: last.Row, Column: last.Column}
			r.mid = page.mid
		}
	}
}

func (s *StoreClient) scanPage(ctx context.Context, r *scanReq) (*scanPage, error) {
	data, err := s.c.request(ctx, "Scan", s.scan, func(e *encoder) { e.scanReq(r) })
	if err != nil {
		return nil, err
	}
	d := newDecoder(data)
	page := d.scanPage()
	if err := d.finish(); err != nil {
		return nil, err
	}
	return page, nil
}

// Close makes later operations fail with store.ErrClosed; scans in
// progress fail at their next page. It does not close the NATS connection
// or the remote store, and is idempotent.
func (s *StoreClient) Close() error { return s.c.close() }
