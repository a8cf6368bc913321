package oracle

import (
	"fmt"
	"log/slog"
	"time"
)

// OptionError reports an unusable field of ServerOptions or ClientOptions.
// It is typed so that configuration code can say which knob is wrong.
type OptionError struct {
	Field  string // the field, e.g. "ServerOptions.Window"
	Value  any    // the rejected value
	Reason string // why it was rejected
}

// Error implements error.
func (e *OptionError) Error() string {
	return fmt.Sprintf("oracle: invalid %s (%v): %s", e.Field, e.Value, e.Reason)
}

// ServerOptions configure NewServer. The zero value (or nil) is valid:
// EnsureDefaults fills in every unset field, and each field documents its
// default.
type ServerOptions struct {
	// Clock is the oracle's clock, the physical part of every timestamp.
	// Tests replace it to move time backwards or far ahead.
	// Default: time.Now.
	Clock func() time.Time

	// Window is how far ahead of the physical time each persisted
	// reservation reaches. Larger windows mean fewer Saves but more
	// timestamp space and physical time skipped on restart. It must be
	// between 1ms and MaxWindow.
	// Default: DefaultWindow (3s).
	Window time.Duration

	// Logger receives persistence events and failures.
	// Default: slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *ServerOptions) EnsureDefaults() *ServerOptions {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports the first unusable field as an *OptionError. Call it
// after EnsureDefaults (NewServer does both): fields left unset are
// reported, not defaulted.
func (o *ServerOptions) Validate() error {
	switch {
	case o.Clock == nil:
		return &OptionError{Field: "ServerOptions.Clock", Value: "nil", Reason: "must be set (call EnsureDefaults)"}
	case o.Window < time.Millisecond || o.Window > MaxWindow:
		return &OptionError{Field: "ServerOptions.Window", Value: o.Window, Reason: fmt.Sprintf("must be between 1ms and %v", MaxWindow)}
	case o.Logger == nil:
		return &OptionError{Field: "ServerOptions.Logger", Value: "nil", Reason: "must be set (call EnsureDefaults)"}
	}
	return nil
}

// ClientOptions configure NewClient. The zero value (or nil) is valid:
// EnsureDefaults fills in every unset field, and each field documents its
// default.
type ClientOptions struct {
	// MaxBatch caps how many timestamps one coalesced Reserve call asks
	// for; waiters beyond the cap wait for the next call. It must be
	// between 1 and MaxReserve.
	// Default: DefaultMaxBatch (4096).
	MaxBatch int
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *ClientOptions) EnsureDefaults() *ClientOptions {
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	return o
}

// Validate reports the first unusable field as an *OptionError. Call it
// after EnsureDefaults (NewClient does both).
func (o *ClientOptions) Validate() error {
	if o.MaxBatch < 1 || o.MaxBatch > MaxReserve {
		return &OptionError{Field: "ClientOptions.MaxBatch", Value: o.MaxBatch, Reason: fmt.Sprintf("must be 1..%d", MaxReserve)}
	}
	return nil
}
