// Package remote carries the store and the timestamp oracle over NATS, so
// that one process can own the pebble store and the oracle while runners,
// loaders and tools in other processes (or on other machines) use them
// through clients implementing the same interfaces: StoreClient is a
// store.Store and OracleClient an oracle.Reserver.
//
// The owning process runs the services:
//
//	opts := &remote.ServiceOptions{StoreID: id}        // nil: all defaults
//	svc, err := remote.ServeStore(nc, db, opts)        // micro service "trickle-store"
//	osvc, err := remote.ServeOracle(nc, backend, opts) // micro service "trickle-oracle"
//
// and every other process the clients:
//
//	st, err := remote.NewStore(nc, nil)   // or &remote.ClientOptions{...}
//	oc, err := remote.NewOracle(nc, nil)
//	ts, err := oracle.NewClient(oc, nil) // one Reserve in flight per process
//
// # Options
//
// Services and clients are configured apart, with ServiceOptions and
// ClientOptions: they run in different processes, and most knobs concern
// one side only (a queue group, a handler timeout or a store id mean
// nothing to a client; a request timeout or a scan page size nothing to a
// service). Within a side, one value configures both the store and the
// oracle, as a deployment gives them the same prefix, logger and store id;
// the few fields that concern one of them say so. Every field states its
// default, EnsureDefaults fills them in, and Validate reports an unusable
// one as an *OptionError naming it.
//
// # Subjects
//
// With the default prefix "trickle" (SubjectPrefix changes it, so that
// several deployments can share a NATS system), the endpoints are
//
//	trickle.store.apply    RowTxn -> RowResult
//	trickle.store.applyall [RowTxn] -> [RowResult], in request order
//	trickle.store.ingest   [RowTxn] -> (), written as sstables, all or none
//	trickle.store.readrow  (table, row, cols, spans) -> cells
//	trickle.store.readrows [(table, row, cols, spans)] -> [cells], in request order
//	trickle.store.readnow  ([(table, row, cols, spans)], relative bounds) -> ([cells], timestamp)
//	trickle.store.applynow (RowTxn, relative mutations) -> (RowResult, timestamp)
//	trickle.store.scan     one page of a scan (see below)
//	trickle.store.tables   group -> table names
//	trickle.store.id       -> the store's id and where it lives (StoreID)
//	trickle.oracle.reserve n -> first of n timestamps
//	trickle.oracle.stats   -> (issued, current)
//
// plus the usual micro discovery subjects ($SRV.PING, $SRV.INFO,
// $SRV.STATS). A ReadRows call is one request on readrows whatever the
// number of rows (at most store.MaxRowReads), served by one call of the
// store, so its rows come from one snapshot of a pebble store; a service
// older than version 1.2 has no such endpoint, so the request finds no
// responders (ErrUnavailable). ApplyAll is likewise one request on
// applyall (at most store.MaxApplyAll row transactions), served by one
// call of the store: one pebble batch and at most one sync; it is new in
// version 1.3. ReadRowsNow (version 1.4) is a ReadRows at a timestamp the
// service draws from its oracle (ServiceOptions.Oracle) while serving it,
// added to the span bounds the request marks: it gives a read-only
// transaction its snapshot and its first read in one round trip. ApplyNow
// (also 1.4) is an Apply whose marked mutations are at a timestamp the
// service draws the same way: a transaction's commit point with its
// commit timestamp. A service without an oracle answers both with code
// 501, an older one has no responders; the client reports both as
// errors.ErrUnsupported, and nothing was applied. Ingest (version 1.6) is
// one request on ingest, served by one Ingest of a pebble store: sorted
// sstables linked into its LSM, which is how an import (a bulk load)
// through a runner writes; a service whose store cannot ingest, or an
// older one, makes the client report errors.ErrUnsupported, and the
// import writes with ApplyAll instead.
//
// # Wire format
//
// Bodies are compact binary (varints, length-prefixed strings, fixed
// 8-byte timestamps), starting with a version byte (1); requests then
// carry the time the client will wait, so a handler gives up when nobody
// is listening any more. Decoders check every length against the message
// and never panic on garbage (see the fuzz tests). Errors travel as micro
// error responses whose code the client maps back to the error the local
// implementation returns: *store.InvalidError (field by field), the
// ErrClosed of store or oracle, oracle.ErrInvalidCount and ErrExhausted,
// context errors; transport failures become ErrUnavailable, ErrBusy or
// ErrTooLarge.
//
// # Messages in parts
//
// A request or answer larger than the connection's max payload (read
// from the connection each time; 1 MiB by default in NATS) travels in
// parts, so that row transactions and cells of many megabytes work
// through any NATS server. Messages that fit take one request and one
// answer, exactly as above. Every part is a frame starting with byte 2 (a
// peer that knows only whole messages refuses it as "wire version 2"),
// then its kind; each part is a request answered before the next is
// sent, so neither side can outrun the other, and each leaves some of the
// max payload for headers:
//
//	client -> <endpoint>     open (timeout, size, CRC-32C, first bytes)
//	client <- service        ack (transfer id, next part, largest part, part subject)
//	client -> part subject   part (id, number, bytes)   ... acked likewise
//	client <- service        the answer to the last part: the answer to the request
//
// The part subject, <prefix>.store.part.<instance id>, belongs to the
// service instance that took the open frame, so that all parts of an
// upload reach the instance holding it, whatever the queue group. An
// answer too large for one message is sent as a download frame (id, size,
// CRC-32C, part subject, first bytes); the client pulls the rest:
//
//	client -> part subject   pull (id, number, largest part it takes)
//	client <- service        chunk (id, number, bytes)
//
// A part must carry the number expected next: a lost, repeated or
// reordered part, bytes beyond the announced size or a checksum mismatch
// of the reassembled message drop the transfer and fail the request with
// ErrProtocol. The handler runs only on the whole, verified request, so a
// row transaction is applied whole or not at all. A client that gives up
// sends an abort frame.
//
// The service holds at most ServiceOptions.MaxBufferedBytes (default
// 256 MiB) for uploads in progress and answers not yet fetched together: a
// message larger than that fails with ErrTooLarge, one that does not fit
// next to the others with ErrBusy. A transfer is dropped when the client's
// timeout (capped by ServiceOptions.HandlerTimeout) has passed, so a
// client that vanishes mid-transfer costs memory only until then; each
// pull of an answer keeps it for the request's timeout again.
//
// Time: a request in parts gets ClientOptions.RequestTimeout plus its
// size at ClientOptions.MinTransferRate (default 1 MiB/s), and an answer
// in parts the same for its size from its first part on, both within the
// caller's deadline: a 16 MiB batch of pages on a slow link or a busy
// service must not fail for taking longer than a small request. A
// stalled transfer is still noticed as soon as a small request's: every
// part and pull but the last part of an upload (whose answer waits for
// the handler) must be answered within RequestTimeout. Parts are handled on one
// subscription per service, and the request an upload completes on the
// service's bounded workers. The oracle's messages always fit in one; its
// service refuses parts.
//
// # Scans
//
// A Scan is served in pages of at most ClientOptions.ScanPageCells cells
// and about 1 MiB (less if the max payload is smaller), so a page is one
// message. A cell larger than that comes alone on its page, which is sent
// in parts.
// A page that ends inside a column (a column with more versions than
// fit) tells the client where, so the next page finishes that column before
// resuming with ScanRequest.After, which skips a whole column. Each page
// reads its own snapshot of the store; a local Scan reads one snapshot for
// the whole iteration.
//
// # Concurrency
//
// A service handles at most ServiceOptions.StoreConcurrency (or
// OracleConcurrency) requests at once on a pool of worker goroutines;
// further requests wait in NATS's subscription queue (or, for a request
// whose last part arrived, on the part subscription). A request's work is
// bounded by the client's deadline, capped by
// ServiceOptions.HandlerTimeout.
package remote
