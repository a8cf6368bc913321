package engine

// DB is an engine as the front holds it: framework.DB is defined as this
// type. Open builds one with NewDB; the observer runtime and operators'
// tools convert a framework.DB back to reach the engine behind it.
type DB struct {
	e Engine
	// born is the timestamp of the store's first open (0: unknown, a
	// store from before it was recorded): no snapshot below it can show
	// anything the store held.
	born uint64
}

// NewDB returns the handle of e.
func NewDB(e Engine) *DB { return &DB{e: e} }

// NewDBBorn returns the handle of e on a store first opened at born.
func NewDBBorn(e Engine, born uint64) *DB { return &DB{e: e, born: born} }

// Engine returns the engine behind the handle.
func (d *DB) Engine() Engine { return d.e }

// Born returns the timestamp of the store's first open; 0 if unknown.
func (d *DB) Born() uint64 { return d.born }

// Tx is a transaction as the front holds it: framework.Txn is defined as
// this type, so that the observer runtime hands an observer the front's
// Txn for the engine's transaction it runs in.
type Tx struct{ t Txn }

// NewTx returns the handle of t.
func NewTx(t Txn) *Tx { return &Tx{t: t} }

// Txn returns the transaction behind the handle.
func (t *Tx) Txn() Txn { return t.t }
