package tikv

// DefaultEngine declares the engine framework.Open runs on this store
// when its caller names none: "tikv", TiKV's own transactions.
//
// A caller may still run the framework's protocol
// over the store's cells (framework.EngineProtocol); the store records
// which one its data belongs to, so that processes of one deployment
// cannot run different ones.
func (s *Store) DefaultEngine() string { return "tikv" }
