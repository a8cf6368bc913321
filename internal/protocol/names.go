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

// Groups is the locality group layout a store must be opened with for the
// framework: notifications in NotifyGroup. Pass it as store.Options.Groups
// (or add its entries to a layout of one's own).
func Groups() map[string]string { return map[string]string{NotifyFamily: NotifyGroup} }

// StoreOptions returns o (nil: zero options) with the framework's locality
// groups added to its Groups.
func StoreOptions(o *store.Options) *store.Options {
	var c store.Options
	if o != nil {
		c = *o
	}
	g := Groups()
	for f, grp := range c.Groups {
		g[f] = grp
	}
	c.Groups = g
	return &c
}
