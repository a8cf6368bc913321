package remote

import (
	"context"
	"fmt"
	"iter"

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
	c                                                              *client
	apply, applyAll, readRow, readRows, scan, tablesSj, identitySj string
}

var _ store.Store = (*StoreClient)(nil)

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
		c:          c,
		apply:      subject(c.cfg.SubjectPrefix, "store", storeApply),
		applyAll:   subject(c.cfg.SubjectPrefix, "store", storeApplyAll),
		readRow:    subject(c.cfg.SubjectPrefix, "store", storeReadRow),
		readRows:   subject(c.cfg.SubjectPrefix, "store", storeReadRows),
		scan:       subject(c.cfg.SubjectPrefix, "store", storeScan),
		tablesSj:   subject(c.cfg.SubjectPrefix, "store", storeTables),
		identitySj: subject(c.cfg.SubjectPrefix, "store", storeIdentity),
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

// Scan returns the cells req selects in key order, fetching a page at a
// time (see ClientOptions.ScanPageCells) only when the consumer has taken every
// cell of the previous one; a consumer that stops early costs no more
// requests. The first error ends the sequence.
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
