// Package tikv is the raw store on a TiKV cluster: a store.Store of cells
// and row transactions, with no framework transaction of its own.
// Framework transactions over it run in internal/tikvengine, as TiKV's own
// transactions on the store's client (framework.EngineTiKV, the engine
// the store declares), which framework.Open builds from what the store
// exposes (Client, Options, OnClose); the store keeps the framework's
// non-transactional records for that engine. The layered engine, the
// framework's protocol over this store's cells (framework.EngineProtocol),
// also runs here, as on any store.Store, but no deployment is meant to
// choose it (the runner opens EngineTiKV on a tikv:// store): it exists
// because the protocol is defined over store.Store alone, and its checks
// (its tests on TiKV, sicheck -mode tikv) run it on a store whose row
// transactions cross a network and span regions.
//
// It is for deployments that outgrow one machine's disk or want no
// process to own the data: every process opens the cluster itself, and PD
// (TiKV's placement driver) serves as the timestamp oracle, so nothing but
// TiKV and PD has to stay up.
//
// A row transaction is one short optimistic TiKV transaction. It reads the
// row's current state from its snapshot to evaluate the checks, writes the
// mutations, and locks a per-row guard key, so that any two row
// transactions that write the same row conflict in TiKV even when they
// touch different cells; on a write conflict the whole row transaction is
// evaluated again on a fresh snapshot (bounded, with backoff). A row
// transaction whose checks fail, or that ends up writing nothing, commits
// nothing: its snapshot is its linearization point. ApplyAll runs all its
// row transactions as one TiKV transaction and falls back to one per row
// when that one conflicts.
//
// Cells are laid out with the same order-preserving codec as the pebble
// store, under a namespace prefix: a row's cells are contiguous, and each
// locality group is a key range of its own, so a scan of the notification
// group never reads a region of data. Values are framed with one leading
// byte because TiKV refuses empty values.
//
// An Apply whose commit result TiKV could not confirm (the commit request
// was sent but its answer was lost) fails with an error matching both
// ErrUndetermined and store.ErrUnavailable: it may or may not have been
// applied, as for any store reached over a network.
package tikv
