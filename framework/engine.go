package framework

import (
	"github.com/trickle-dev/trickle/internal/enginechoice"
	"github.com/trickle-dev/trickle/store"
)

// Engine names a transaction engine: how framework transactions become
// reads and writes of a store. Each engine keeps its data in a key space
// of its own, so every process of a deployment must run the same one on
// its store, or they would not see each other's writes. Open records the
// engine in the store the first time a DB opens on it and fails with
// ErrEngineMismatch when a later one would run another.
type Engine string

const (
	// EngineDefault runs the engine the store declares (see
	// EngineDeclarer), looking through wrappers that unwrap (see
	// StoreWrapper); a store that declares none runs EngineProtocol.
	EngineDefault Engine = ""
	// EngineProtocol runs the framework's own protocol over the store's
	// cells, with timestamps from the Oracle given to Open. It runs on
	// any store, a TiKV one included.
	EngineProtocol Engine = enginechoice.Protocol
	// EngineTiKV makes each framework transaction one TiKV transaction,
	// with timestamps from PD whatever the Oracle given to Open is. It
	// needs a store/tikv Store, or a wrapper that unwraps to one.
	EngineTiKV Engine = enginechoice.TiKV
)

// EngineDeclarer is a store that declares the engine Open runs on it when
// Options.Engine is EngineDefault: store/tikv's Store declares
// EngineTiKV. The declaration is the store's explicit say, so that no
// engine is picked for what a store's type happens to implement.
type EngineDeclarer interface {
	// DefaultEngine returns an Engine's name, such as "tikv".
	DefaultEngine() string
}

// StoreWrapper is a store that decorates another (to count its calls or
// fail some, say) and says which. Open looks through it for the store's
// declared engine and, for EngineTiKV, for the TiKV store whose
// transactions it runs (the decorator then sees only the framework's
// records, not the transactions, which go to TiKV directly). A decorator
// that does not unwrap hides both: on it EngineDefault runs
// EngineProtocol, and EngineTiKV fails.
type StoreWrapper interface {
	// Unwrap returns the store it decorates.
	Unwrap() store.Store
}
