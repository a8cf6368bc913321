package engine

// DB is an engine as the front holds it: framework.DB is defined as this
// type. Open builds one with NewDB; the observer runtime and operators'
// tools convert a framework.DB back to reach the engine behind it.
type DB struct{ e Engine }

// NewDB returns the handle of e.
func NewDB(e Engine) *DB { return &DB{e: e} }

// Engine returns the engine behind the handle.
func (d *DB) Engine() Engine { return d.e }

// Tx is a transaction as the front holds it: framework.Txn is defined as
// this type, so that the observer runtime hands an observer the front's
// Txn for the engine's transaction it runs in.
type Tx struct{ t Txn }

// NewTx returns the handle of t.
func NewTx(t Txn) *Tx { return &Tx{t: t} }

// Txn returns the transaction behind the handle.
func (t *Tx) Txn() Txn { return t.t }
