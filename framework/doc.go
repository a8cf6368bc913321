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
// # One contract for every engine
//
// An observer must compute the same result whether its transactions run
// on the framework's protocol over a store or as TiKV's own, so where two
// engines could answer differently the framework chooses one answer, and
// one conformance suite (internal/enginetest) holds every engine to it:
//
//   - A scan reads the transaction's own writes as they were when the
//     scan began, at any page size: writes made while iterating are not
//     seen by that scan, only by a later one (a Get sees them at once).
//   - A read as of a past timestamp (ViewAt) is registered, checked
//     against the safe point, run, and checked again: below the safe
//     point it fails with ErrSnapshotTooOld without running, and if a
//     collection passed it while fn ran it fails with ErrSnapshotTooOld
//     whatever fn returned. The safe point itself is readable. A
//     timestamp not handed out yet fails with ErrFutureSnapshot.
//   - Of two writers of a cell the first to commit wins; the other runs
//     again at a new snapshot, reading the winner's write.
//   - A guarded cell written without its guard, or a cell of a declared
//     guarded family whose guard the DB does not know, fails with
//     ErrUnguarded on every engine, though only some need the rule.
//   - No transaction begins while the process's lease has lapsed
//     (ErrLeaseLost), and a read after it lapsed fails with
//     ErrSnapshotTooOld.
//   - A call whose context ended fails with the context's error (or, for
//     one that writes, ErrCommitUnknown); none hangs.
//   - A strongly observed write leaves a notification that Find and
//     Pending see once the commit returned, from any process. On TiKV a
//     commit finishes its secondary keys (a notification is one) in the
//     background, or, committed asynchronously, leaves them all locks:
//     Find also checks the range's locks, on a DB's first Find of a table
//     and then every tikvengine Options.LockCheckInterval (1 s), yielding
//     a locked notification as one that may have work and resolving one
//     past its lock's TTL, so a scanner's pass may see such a
//     notification that much later; an operator's wait or status, which
//     reads through an engine of its own, sees it at once. The writer's
//     own process may answer Pending from its own commits: the newest
//     version at least, older ones left for a later run.
//   - A weak notification is refused with ErrNotWeak for a column no
//     weak observer observes.
//
// Limits are the store's: a cell over TiKV's entry limit fails with
// ErrTooLarge at Set; the protocol over pebble sets none.
//
// # Testing observers
//
// Package framework/frameworktest runs a registry in process on a store in
// memory: write with its DB, call WaitForObservers, check the result.
// Package framework/admin has what operators need besides: pending and
// failing notifications, raw dumps, garbage collection.
package framework
