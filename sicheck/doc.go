// Package sicheck tells whether a history of transactions could have run
// under snapshot isolation, the isolation the framework promises (a
// transaction sees everything committed before it started, and of two
// concurrent transactions writing one cell at most one commits), in the
// way Jepsen's Elle does for databases: from what the transactions read,
// it infers the order in which versions were installed and the
// dependencies between transactions, and searches them for a cycle snapshot
// isolation forbids.
//
// The workload is list-append: each key holds a list, transactions append
// unique values to some keys and read others. A read returns the whole
// list, so every read tells the order of the appends before it, and the
// longest read of a key is its version order. From it come the edges
// between committed transactions:
//
//   - ww: T1 appended a value and T2 the next one of the key;
//   - wr: T2 read a list whose last value T1 appended;
//   - rw: T1 read a list, and T2 appended the value after its last
//     (T1 did not see T2's write: an anti-dependency);
//   - rt: T1 completed before T2 was invoked (real time: a transaction
//     sees everything that committed before it started).
//
// Snapshot isolation allows a cycle of these only if two of its rw edges
// are adjacent (write skew); every other cycle is a violation, reported
// with its transactions: G0 (ww only), G1c (ww and wr), G-single (one rw)
// and G-nonadjacent (more, none adjacent), with "-realtime" when real time
// closes it. The check also reports what no cycle shows: a read of a value
// an aborted transaction appended (G1a), of a value a transaction appended
// before its last append to the key (G1b), reads of one key that disagree
// on its order, a transaction that does not see its own appends, values
// read that nobody appended, and a committed append that a later read
// misses.
//
// A transaction whose outcome its client could not learn (the store
// stopped answering at its commit, or the client was killed) is "info": it
// counts as committed if one of its appends was read, and takes no part
// otherwise.
//
// ListAppend and Bank run the workloads on a framework.DB and record their
// histories; cmd/sicheck runs them against the framework's stores while it
// kills and pauses processes.
package sicheck
