package remote

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// Endpoint names of the store service; the subject of each is
// <prefix>.store.<name>.
const (
	storeApply = "apply"
	// storeApplyAll serves ApplyAll: all row transactions of a call in
	// one request, run with one call of the store.
	storeApplyAll = "applyall"
	// storeIngest serves Ingest: row transactions written as sstables
	// linked into the LSM, all or none.
	storeIngest  = "ingest"
	storeReadRow = "readrow"
	// storeReadRows serves ReadRows: all reads of a call in one request
	// and one answer (each in parts if large).
	storeReadRows = "readrows"
	// storeReadNow serves ReadRowsNow: a ReadRows at a timestamp the
	// service draws from its oracle.
	storeReadNow = "readnow"
	// storeApplyNow serves ApplyNow: an Apply whose marked mutations are
	// at a timestamp the service draws from its oracle.
	storeApplyNow = "applynow"
	// storeApplyAtomic serves ApplyAtomic: row transactions written all
	// or none at a timestamp the service draws from its oracle.
	storeApplyAtomic = "applyatomic"
	storeScan        = "scan"
	storeTables      = "tables"
)

// StoreService serves a store.Store to other processes over NATS. It is
// what the process that owns the pebble store runs, so that runners,
// loaders and tools elsewhere can use the store through a StoreClient.
type StoreService struct {
	srv *server
	st  store.Store
	or  oracle.Reserver // ServiceOptions.Oracle: nil if reads cannot be timed here
}

// ServeStore starts a micro service "trickle-store" on nc serving st on
// the subjects <prefix>.store.{apply,applyall,ingest,readrow,readrows,readnow,applynow,applyatomic,scan,tables,id}.
// opts may be nil (all defaults); it is copied. An unusable option fails
// with an *OptionError naming the field. It does not own st or nc: Stop
// leaves both open.
// When it returns, the NATS server knows the endpoints (unless the
// connection is down: then they are registered when it reconnects).
func ServeStore(nc *nats.Conn, st store.Store, opts *ServiceOptions) (*StoreService, error) {
	if st == nil {
		return nil, errors.New("remote: ServeStore: nil store")
	}
	cfg, err := serviceOptions(opts)
	if err != nil {
		return nil, err
	}
	conc := cfg.StoreConcurrency
	srv, err := newServer(nc, cfg, "trickle-store", "store", "trickle store: row transactions, reads and scans", conc, true)
	if err != nil {
		return nil, err
	}
	s := &StoreService{srv: srv, st: st, or: cfg.Oracle}
	grp := srv.svc.AddGroup(cfg.SubjectPrefix + ".store")
	for _, ep := range []struct {
		name string
		h    handlerFunc
	}{
		{storeApply, s.apply},
		{storeApplyAll, s.applyAll},
		{storeIngest, s.ingest},
		{storeReadRow, s.readRow},
		{storeReadRows, s.readRows},
		{storeReadNow, s.readNow},
		{storeApplyNow, s.applyNow},
		{storeApplyAtomic, s.applyAtomic},
		{storeScan, s.scan},
		{storeTables, s.tables},
		{storeIdentity, s.identity},
	} {
		if err := srv.endpoint(grp, ep.name, ep.h); err != nil {
			srv.stop()
			return nil, err
		}
	}
	srv.ready()
	srv.log.Info("remote: store service started", "prefix", cfg.SubjectPrefix, "concurrency", conc)
	return s, nil
}

// Stop stops serving: it unsubscribes, answers requests still queued with
// ErrUnavailable, waits for running requests to finish and drops messages
// in parts still in transfer. It does not close the store. Stop is
// idempotent.
func (s *StoreService) Stop() error { return s.srv.stop() }

func (s *StoreService) apply(ctx context.Context, d *decoder, e *encoder) error {
	txn := d.applyReq()
	if err := d.finish(); err != nil {
		return err
	}
	res, err := s.st.Apply(ctx, txn)
	if err != nil {
		return err
	}
	e.applyResp(res)
	return nil
}

// applyAll serves an ApplyAll call with one call of the store, so that a
// local store writes all the row transactions in one batch.
func (s *StoreService) applyAll(ctx context.Context, d *decoder, e *encoder) error {
	txns := d.applyAllReq()
	if err := d.finish(); err != nil {
		return err
	}
	results, err := s.st.ApplyAll(ctx, txns)
	if err != nil {
		return err
	}
	if len(results) != len(txns) {
		return fmt.Errorf("remote: ApplyAll: store returned %d results for %d row transactions", len(results), len(txns))
	}
	e.applyAllResp(results)
	return nil
}

// errNoIngest is a store service's answer to Ingest when its store cannot.
var errNoIngest = fmt.Errorf("remote: the served store cannot ingest sstables: %w", errors.ErrUnsupported)

// ingest serves an Ingest call with one call of the store.
func (s *StoreService) ingest(ctx context.Context, d *decoder, e *encoder) error {
	txns := d.applyAllReq()
	if err := d.finish(); err != nil {
		return err
	}
	ing, ok := s.st.(store.Ingester)
	if !ok {
		return errNoIngest
	}
	if err := ing.Ingest(ctx, txns); err != nil {
		return err
	}
	e.u8(wireVersion)
	return nil
}

func (s *StoreService) readRow(ctx context.Context, d *decoder, e *encoder) error {
	r := d.readRowReq()
	if err := d.finish(); err != nil {
		return err
	}
	cells, err := s.st.ReadRow(ctx, r.table, r.row, r.cols, r.spans)
	if err != nil {
		return err
	}
	idx, err := columnIndexes(cells, r.cols)
	if err != nil {
		return fmt.Errorf("remote: ReadRow: %w", err)
	}
	e.readRowResp(cells, idx)
	return nil
}

// readRows serves a ReadRows call with one call of the store, so that the
// rows come from one snapshot if the store reads them so (the pebble
// store does), and answers all results in one message.
func (s *StoreService) readRows(ctx context.Context, d *decoder, e *encoder) error {
	reads := d.readRowsReq()
	if err := d.finish(); err != nil {
		return err
	}
	results, idx, err := s.readAll(ctx, "ReadRows", reads)
	if err != nil {
		return err
	}
	e.readRowsResp(results, idx)
	return nil
}

// readAll reads reads with one call of the store and maps each result's
// cells to its read's columns.
func (s *StoreService) readAll(ctx context.Context, op string, reads []store.RowRead) ([][]store.Cell, [][]int, error) {
	results, err := s.st.ReadRows(ctx, reads)
	if err != nil {
		return nil, nil, err
	}
	if len(results) != len(reads) {
		return nil, nil, fmt.Errorf("remote: %s: store returned %d results for %d reads", op, len(results), len(reads))
	}
	idx := make([][]int, len(results))
	for i := range results {
		if idx[i], err = columnIndexes(results[i], reads[i].Columns); err != nil {
			return nil, nil, fmt.Errorf("remote: %s: reads[%d]: %w", op, i, err)
		}
	}
	return results, idx, nil
}

// draw draws a timestamp from the service's oracle, or fails with
// errNoOracle if it was given none; an oracle's failure is wrapped with
// store.ErrNoTimestamp, since nothing was done yet.
func (s *StoreService) draw(ctx context.Context) (uint64, error) {
	if s.or == nil {
		return 0, errNoOracle
	}
	ts, err := s.or.Reserve(ctx, 1)
	if err != nil {
		return 0, fmt.Errorf("remote: the store service's oracle: %w: %w", store.ErrNoTimestamp, err)
	}
	return ts, nil
}

// checkMarks fails if rel marks any of n timestamps at or past n (what
// names them), before a timestamp is drawn for nothing.
func checkMarks(op, what string, rel uint64, n int) error {
	if n < 64 && rel>>n != 0 {
		return &store.InvalidError{Op: op, Field: what, Reason: fmt.Sprintf("relative timestamps %#x name more than its %d", rel, n)}
	}
	return nil
}

// addMarked adds now to each of the n timestamps at(i) that rel marks,
// failing with an InvalidError naming field(i) if a sum overflows.
func addMarked(op string, rel uint64, n int, now uint64, field func(i int) string, at func(i int) *uint64) error {
	for i := range n {
		if rel&(1<<i) == 0 {
			continue
		}
		ts := at(i)
		if *ts > ^uint64(0)-now {
			return &store.InvalidError{Op: op, Field: field(i), Reason: fmt.Sprintf("%d plus the timestamp %d overflows", *ts, now)}
		}
		*ts += now
	}
	return nil
}

// applyNow serves an ApplyNow call: it draws a timestamp from the
// service's oracle, adds it to the timestamps of the mutations the request
// marks as relative, and applies the row transaction. Drawn after the
// request arrived, the timestamp is later than everything the caller did
// before calling (its prewrites), which is what a commit timestamp must be.
func (s *StoreService) applyNow(ctx context.Context, d *decoder, e *encoder) error {
	txn := d.applyReq()
	rel := d.uvarint()
	if err := d.finish(); err != nil {
		return err
	}
	if err := checkMarks("ApplyNow", "Mutations", rel, len(txn.Mutations)); err != nil {
		return err
	}
	ts, err := s.draw(ctx)
	if err != nil {
		return err
	}
	if err := addMarked("ApplyNow", rel, len(txn.Mutations), ts,
		func(i int) string { return fmt.Sprintf("Mutations[%d].Ts", i) },
		func(i int) *uint64 { return &txn.Mutations[i].Ts }); err != nil {
		return err
	}
	res, err := s.st.Apply(ctx, txn)
	if err != nil {
		return err
	}
	e.applyResp(res)
	e.u64(ts)
	return nil
}

// applyAtomic serves an ApplyAtomic call with one call of the store, at a
// commit timestamp drawn from the service's oracle: the one every client
// draws from. A service without an oracle, or whose store cannot write
// atomically, answers errors.ErrUnsupported having applied nothing.
func (s *StoreService) applyAtomic(ctx context.Context, d *decoder, e *encoder) error {
	txns := d.applyAllReq()
	rel := make([]int, len(txns))
	for i := range rel {
		// The store checks the count against the mutations; this only
		// keeps it an int.
		if n := d.uvarint(); n <= math.MaxInt32 {
			rel[i] = int(n)
		} else {
			d.fail("rel[%d] = %d", i, n)
		}
	}
	if err := d.finish(); err != nil {
		return err
	}
	if s.or == nil {
		return errNoOracle
	}
	st, ok := s.st.(store.AtomicApplier)
	if !ok {
		return errNoAtomic
	}
	ts, results, err := st.ApplyAtomic(ctx, txns, rel, reserverClock{s.or})
	if err != nil {
		return err
	}
	if len(results) != len(txns) {
		return fmt.Errorf("remote: ApplyAtomic: store returned %d results for %d row transactions", len(results), len(txns))
	}
	e.applyAllResp(results)
	e.u64(ts)
	return nil
}

// reserverClock is an oracle.Reserver as a store.Clock.
type reserverClock struct{ r oracle.Reserver }

func (c reserverClock) Timestamp(ctx context.Context) (uint64, error) { return c.r.Reserve(ctx, 1) }

// readNow serves a ReadRowsNow call: it draws a timestamp from the
// service's oracle, adds it to the bounds the request marks as relative,
// and reads. Drawing it here, after the request arrived, gives the read a
// timestamp later than every commit its caller could have seen before
// sending it, which is all a snapshot's start timestamp must be.
func (s *StoreService) readNow(ctx context.Context, d *decoder, e *encoder) error {
	reads := d.readRowsReq()
	rel := d.uvarint()
	if err := d.finish(); err != nil {
		return err
	}
	for i := range reads {
		if err := checkMarks("ReadRowsNow", fmt.Sprintf("reads[%d].Spans", i), rel, len(reads[i].Spans)); err != nil {
			return err
		}
	}
	ts, err := s.draw(ctx)
	if err != nil {
		return err
	}
	for i := range reads {
		spans := reads[i].Spans
		if err := addMarked("ReadRowsNow", rel, len(spans), ts,
			func(j int) string { return fmt.Sprintf("reads[%d].Spans[%d].MaxTs", i, j) },
			func(j int) *uint64 { return &spans[j].MaxTs }); err != nil {
			return err
		}
	}
	results, idx, err := s.readAll(ctx, "ReadRowsNow", reads)
	if err != nil {
		return err
	}
	e.readRowsResp(results, idx)
	e.u64(ts)
	return nil
}

// columnIndexes maps each cell to the index of its column in cols, which
// is all a ReadRow response needs to say about the column. Cells come
// grouped in the order of cols, so a forward walk finds them; the fallback
// search covers a Store that orders them otherwise.
func columnIndexes(cells []store.Cell, cols []store.Column) ([]int, error) {
	idx := make([]int, len(cells))
	j := 0
	for i := range cells {
		c := cells[i].Column
		if j >= len(cols) || cols[j] != c {
			k := j
			for k < len(cols) && cols[k] != c {
				k++
			}
			if k == len(cols) {
				for k = 0; k < len(cols) && cols[k] != c; k++ {
				}
				if k == len(cols) {
					return nil, fmt.Errorf("store returned unrequested column %s", c)
				}
			}
			j = k
		}
		idx[i] = j
	}
	return idx, nil
}

func (s *StoreService) tables(ctx context.Context, d *decoder, e *encoder) error {
	group := d.str()
	if err := d.finish(); err != nil {
		return err
	}
	tables, err := s.st.Tables(ctx, group)
	if err != nil {
		return err
	}
	e.tablesResp(tables)
	return nil
}
