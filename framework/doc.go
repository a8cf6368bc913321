// Package framework is what an observer author uses: transactions over a
// Bigtable-like store (DB, Txn) and observers — functions that run, each in
// its own transaction, when a column they watch changes (Observer,
// Registry).
//
// # Transactions
//
// DB.Update runs a function in a read-write transaction and commits it; on a
// conflict it runs the function again at a new snapshot, so no stale write
// is ever applied. DB.View runs a read-only snapshot. Transactions span rows
// and tables. The isolation level is snapshot isolation: no dirty or
// non-repeatable reads, no lost updates (of two concurrent writers of a
// cell the first to commit wins), but write skew is possible. A
// transaction whose rows fit in one store write commits in one phase;
// others use Percolator's two-phase commit, and the locks of a process
// that died are rolled forward or back by whoever meets them next. A
// Guard declares a family whose cells are always written with another
// cell (their guard): one-phase commits check the guard and not each of
// them. DB.ViewAt reads a past snapshot (TimestampAt maps a time to it),
// as far back as garbage collection keeps history.
//
// # Observers
//
// An observer has a name, the columns of a table it watches, a kind and a
// function. A Strong observer runs after a transaction writes a watched
// column: at most one of its runs commits per change, and several changes
// made before it runs collapse into one run. A Weak observer runs when
// someone asks with NotifyWeak, possibly more than once; it suits work that
// is recomputed or combined rather than applied once (package
// framework/combine builds conflict-free counters on it). Observers are
// registered in a Registry built in main and handed to a runner (package
// runner), which finds changed columns and runs their observers. An
// observer added to a store that holds data already is brought up to date
// by a backfill (package framework/admin), and results leave the store for
// other systems through export queues (package framework/export).
//
// A DB's writes notify the observers of the columns they touch; a DB always
// knows which columns are observed (Open fails with ErrNoObservedColumns
// rather than write changes no observer would see).
//
// # Testing observers
//
// Package framework/frameworktest runs a registry in process on a store in
// memory: write with its DB, call WaitForObservers, check the result.
// Package framework/admin has what operators need besides: pending and
// failing notifications, raw dumps, garbage collection.
package framework
