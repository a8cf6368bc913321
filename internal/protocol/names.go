package protocol

import "github.com/trickle-dev/trickle/store"

// Names the framework reserves in the store. The store itself knows none of
// them: it only keeps families in the locality groups it is told about
// (Groups).
const (
	// ReservedPrefix starts the tables and families that belong to the
	// framework; user transactions may not touch them.
	ReservedPrefix = "__"
	// NotifyFamily is the family of notifications: one cell per observed
	// column of a row that changed (NotifyColumn).
	NotifyFamily = "ntfy"
	// NotifyGroup is the locality group notifications live in, apart from
	// the data, so that looking for work never reads a byte of the data.
	NotifyGroup = "notify"
	// AckFamily holds each strong observer's ack: the start timestamp of its
	// last committed run, per observed column.
	AckFamily = ReservedPrefix + "ack"
	// MetaTable holds the framework's own records (safe point, published
	// observed columns).
	MetaTable = ReservedPrefix + "meta"
	// FailuresTable holds the records of notifications whose observer keeps
	// failing, for status commands.
	FailuresTable = ReservedPrefix + "failures"
)

// SafePoint is the cell that holds the garbage-collection safe point: an
// 8-byte big-endian timestamp at version 0, only ever raised. Below it,
// versions may have been collected: a transaction that started there must
// not read or commit. The store is told of it (StoreOptions), so that it
// refuses the prewrites, one-phase commits and commit points of such
// transactions itself (store.RowTxn.Snapshot).
var SafePoint = store.SafePointCell{Table: MetaTable, Row: []byte("gc"), Column: store.Column{Family: "gc", Qualifier: "safe_point"}}

// Groups is the locality group layout a store must be opened with for the
// framework: notifications in NotifyGroup. Pass it as store.Options.Groups
// (or add its entries to a layout of one's own).
func Groups() map[string]string { return map[string]string{NotifyFamily: NotifyGroup} }

// StoreOptions returns o (nil: zero options) with the framework's locality
// groups added to its Groups and its safe point cell (SafePoint) named.
func StoreOptions(o *store.Options) *store.Options {
	var c store.Options
	if o != nil {
		c = *o
	}
	sp := SafePoint
	c.SafePoint = &sp
	g := Groups()
	for f, grp := range c.Groups {
		g[f] = grp
	}
	c.Groups = g
	return &c
}
