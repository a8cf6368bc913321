// Package enginechoice decides which transaction engine runs on a store
// and opens it.
//
// framework.Open and the readers of a store's notifications decide the
// same way: by what the caller asked for, else by what the store
// declares, and never by the store's type alone. It is the one place
// that builds an engine (Open): the engines over the raw stores are
// built here, not by the stores. Each
// engine keeps its data in a key space of its own, so the choice is also
// recorded in the store (a marker in the framework's meta table) the
// first time a DB opens on it, and a later choice of another engine fails
// instead of running where the deployment's data is not.
package enginechoice

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv"
)

// The engines, by the names Options.Engine and the marker use.
const (
	// Protocol is the framework's protocol over the store's cells.
	Protocol = "protocol"
	// TiKV is TiKV's own transactions, through a store/tikv Store.
	TiKV = "tikv"
)

// Declarer is a store that declares the engine a DB runs on it when the
// caller does not choose one.
type Declarer interface {
	// DefaultEngine names the engine ("tikv", say).
	DefaultEngine() string
}

// Wrapper is a store that decorates another (to count or fail its calls,
// say) and says which: the choice looks through it for a declaration and
// for the TiKV store whose transactions a DB runs.
type Wrapper interface {
	// Unwrap returns the store it decorates.
	Unwrap() store.Store
}

// ErrMismatch is wrapped by every error about an engine that cannot run
// on a store: a store whose data another engine wrote, an engine the
// store does not offer, a name no engine has.
var ErrMismatch = errors.New("framework: engine mismatch")

// marker is the cell that records which engine a store's data belongs
// to: the engine's name at version 0, written once.
var (
	markerRow    = []byte("engine")
	markerColumn = store.Column{Family: "engine", Qualifier: "name"}
	// bornColumn records, beside the marker and written with it, the
	// timestamp of the store's first open: the oldest snapshot that can
	// show anything the store holds. Stores marked before it was
	// recorded have none.
	bornColumn = store.Column{Family: "engine", Qualifier: "born"}
)

// Choice is an engine chosen for a store, and why.
type Choice struct {
	// Name is the engine: Protocol or TiKV.
	Name string
	// TiKV is the store whose own transactions the engine runs, for
	// TiKV; nil for Protocol.
	TiKV *tikv.Store
	// Why says how the engine was chosen, for messages.
	Why string
}

// Choose returns the engine to run on st: want if not "", else the one
// st (or a store it unwraps to) declares, else Protocol. It does not
// read the store.
func Choose(st store.Store, want string) (Choice, error) {
	c := Choice{Name: want, Why: "Options.Engine is " + want}
	if want == "" {
		c.Name, c.Why = Protocol, fmt.Sprintf("the store (%T) declares no engine", st)
		for s := range chain(st) {
			if d, ok := s.(Declarer); ok {
				c.Name, c.Why = d.DefaultEngine(), fmt.Sprintf("the store %T declares it", s)
				break
			}
		}
	}
	switch c.Name {
	case Protocol:
		return c, nil
	case TiKV:
		for s := range chain(st) {
			if n, ok := s.(*tikv.Store); ok {
				c.TiKV = n
				return c, nil
			}
		}
		return Choice{}, fmt.Errorf("%w: engine %q (%s) needs a TiKV store, and %T is none and unwraps to none (a wrapper of one says which with an Unwrap() store.Store method)", ErrMismatch, c.Name, c.Why, st)
	}
	return Choice{}, fmt.Errorf("%w: no engine is named %q (%s); want %q or %q", ErrMismatch, c.Name, c.Why, Protocol, TiKV)
}

// chain yields st and the stores it unwraps to, outermost first.
func chain(st store.Store) func(func(store.Store) bool) {
	return func(yield func(store.Store) bool) {
		for i := 0; st != nil && i < 64; i++ {
			if !yield(st) {
				return
			}
			w, ok := st.(Wrapper)
			if !ok {
				return
			}
			st = w.Unwrap()
		}
	}
}

// Record checks c against the engine recorded in st, recording c's if
// none is, in one row transaction, with born (a timestamp drawn before the
// call) as the store's first open: a DB opened on a store whose data
// another engine holds fails with ErrMismatch naming both. It returns the
// store's first open as recorded (born if this call recorded it; 0 for a
// store marked before first opens were recorded).
func Record(ctx context.Context, st store.Store, c Choice, born uint64) (uint64, error) {
	res, err := st.Apply(ctx, &store.RowTxn{
		Table: protocol.MetaTable, Row: markerRow,
		Checks: []store.Check{{Column: markerColumn, MaxTs: math.MaxUint64, Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{
			{Column: markerColumn, Value: []byte(c.Name)},
			{Column: bornColumn, Value: strconv.AppendUint(nil, born, 10)},
		},
	})
	if err != nil {
		return 0, fmt.Errorf("framework: recording the store's engine: %w", err)
	}
	if res.Applied {
		return born, nil
	}
	recorded := ""
	if res.Conflict != nil {
		recorded = string(res.Conflict.Value)
	} else if recorded, err = Recorded(ctx, st); err != nil {
		return 0, err
	}
	if err := check(c, recorded); err != nil {
		return 0, err
	}
	return Born(ctx, st)
}

// Born returns the timestamp of st's first open as recorded; 0 if none
// is (a store no DB opened yet, or marked before first opens were
// recorded).
func Born(ctx context.Context, st store.Store) (uint64, error) {
	cells, err := st.ReadRow(ctx, protocol.MetaTable, markerRow, []store.Column{bornColumn}, []store.Span{{MaxTs: math.MaxUint64, Limit: 1}})
	if err != nil {
		return 0, fmt.Errorf("framework: reading the store's first open: %w", err)
	}
	if len(cells) == 0 {
		return 0, nil
	}
	ts, err := strconv.ParseUint(string(cells[0].Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("framework: the store's first open is recorded as %q, not a timestamp", cells[0].Value)
	}
	return ts, nil
}

// Recorded returns the engine recorded in st, "" if none is.
func Recorded(ctx context.Context, st store.Store) (string, error) {
	cells, err := st.ReadRow(ctx, protocol.MetaTable, markerRow, []store.Column{markerColumn}, []store.Span{{MaxTs: math.MaxUint64, Limit: 1}})
	if err != nil {
		return "", fmt.Errorf("framework: reading the store's engine: %w", err)
	}
	if len(cells) == 0 {
		return "", nil
	}
	return string(cells[0].Value), nil
}

// Find returns the engine whose data st holds, to read its
// notifications: the recorded one, or, in a store no DB opened yet, the
// one Choose picks by default.
func Find(ctx context.Context, st store.Store) (Choice, error) {
	recorded, err := Recorded(ctx, st)
	if err != nil {
		return Choice{}, err
	}
	if recorded == "" {
		return Choose(st, "")
	}
	c, err := Choose(st, recorded)
	if err != nil {
		return Choice{}, fmt.Errorf("the store's data belongs to engine %q: %w", recorded, err)
	}
	return c, nil
}

// check compares the engine chosen with the one recorded.
func check(c Choice, recorded string) error {
	if recorded == c.Name {
		return nil
	}
	return fmt.Errorf("%w: the store's data belongs to engine %q (recorded when a DB first opened on it), but this one would run engine %q (%s); every process of a deployment must run one engine: set Options.Engine to %q, or, for a wrapper of a TiKV store, give it an Unwrap() store.Store method", ErrMismatch, recorded, c.Name, c.Why, recorded)
}
