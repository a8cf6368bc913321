// Package remote carries the store and the timestamp oracle over NATS, so
// that one process can own the pebble store and the oracle while runners,
// loaders and tools in other processes (or on other machines) use them
// through clients implementing the same interfaces: StoreClient is a
// store.Store and OracleClient an oracle.Reserver.
//
// The owning process runs the services:
//
//	svc, err := remote.ServeStore(nc, db)        // micro service "trickle-store"
//	osvc, err := remote.ServeOracle(nc, backend) // micro service "trickle-oracle"
//
// and every other process the clients:
//
//	st, err := remote.NewStore(nc)
//	oc, err := remote.NewOracle(nc)
//	ts, err := oracle.NewClient(oc) // one Reserve in flight per process
//
// # Subjects
//
// With the default prefix "trickle" (WithSubjectPrefix changes it, so that
// several deployments can share a NATS system), the endpoints are
//
//	trickle.store.apply    RowTxn -> RowResult
//	trickle.store.readrow  (table, row, cols, spans) -> cells
//	trickle.store.scan     one page of a scan (see below)
//	trickle.store.tables   group -> table names
//	trickle.store.id       -> the store's id and where it lives (WithStoreID)
//	trickle.oracle.reserve n -> first of n timestamps
//	trickle.oracle.stats   -> (issued, current)
//
// plus the usual micro discovery subjects ($SRV.PING, $SRV.INFO,
// $SRV.STATS).
//
// # Wire format
//
// Bodies are compact binary (varints, length-prefixed strings, fixed
// 8-byte timestamps), starting with a version byte; requests then carry
// the time the client will wait, so a handler gives up when nobody is
// listening any more. Decoders check every length against the message
// and never panic on garbage (see the fuzz tests). Errors travel as micro
// error responses whose code the client maps back to the error the local
// implementation returns: *store.InvalidError (field by field), the
// ErrClosed of store or oracle, oracle.ErrInvalidCount and ErrExhausted,
// context errors; transport failures become ErrUnavailable or ErrTooLarge.
//
// # Scans
//
// A Scan is served in pages of at most WithScanPageCells cells and about
// 1 MiB. A page that ends inside a column (a column with more versions than
// fit) tells the client where, so the next page finishes that column before
// resuming with ScanRequest.After, which skips a whole column. Each page
// reads its own snapshot of the store; a local Scan reads one snapshot for
// the whole iteration.
//
// # Concurrency
//
// A service handles at most WithMaxConcurrency requests at once on a
// pool of worker goroutines; further requests wait in NATS's subscription
// queue. A request's work is bounded by the client's deadline, capped by
// WithHandlerTimeout.
package remote
