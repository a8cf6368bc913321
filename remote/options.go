package remote

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trickle-dev/trickle/oracle"
)

// Defaults and bounds of the options.
const (
	// DefaultPrefix is the first subject token of every endpoint.
	DefaultPrefix = "trickle"
	// DefaultQueueGroup is the queue group services subscribe in, so that
	// several instances of a stateless service could share the load.
	DefaultQueueGroup = "trickle"
	// DefaultRequestTimeout bounds a client request whose context has no
	// deadline, so a lost request or reply cannot hang a caller forever.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultHandlerTimeout bounds the work of one request on the server,
	// whatever timeout the client asked for.
	DefaultHandlerTimeout = time.Minute
	// DefaultStoreConcurrency is the default cap on concurrently handled
	// store requests: enough for many Applies to share an fsync (pebble
	// commits concurrent batches together), few enough to bound memory.
	DefaultStoreConcurrency = 64
	// DefaultOracleConcurrency is the default cap on concurrently handled
	// oracle requests: one, on the subscription's own goroutine, since a
	// Reserve is a compare-and-swap and clients coalesce their callers
	// anyway.
	DefaultOracleConcurrency = 1
	// MaxConcurrency bounds StoreConcurrency and OracleConcurrency.
	MaxConcurrency = 4096
	// DefaultScanPageCells is how many cells a Scan asks for per page.
	DefaultScanPageCells = 1024
	// MaxScanPageCells caps the cells of one page on the server, whatever
	// the client asks for.
	MaxScanPageCells = 16384
	// DefaultMaxBufferedBytes caps the bytes a service holds for messages
	// in parts (uploads not yet complete, answers not yet fetched), and
	// the size of an answer in parts a client accepts: enough for many
	// concurrent multi-megabyte row transactions, bounded so that clients
	// which vanish mid-transfer cannot exhaust the service's memory.
	DefaultMaxBufferedBytes = 256 << 20
	// DefaultMinTransferRate is the slowest transfer a client allows a
	// message in parts: a 16 MiB batch of pages gets 16s on top of the
	// request timeout, enough for a slow link or a busy service, while a
	// transfer that stops altogether is still noticed within the request
	// timeout (every part must be answered in it).
	DefaultMinTransferRate = 1 << 20
)

// Bounds of the fields that are durations or byte counts.
const (
	minTimeout     = time.Millisecond
	maxTimeout     = time.Hour
	minMaxBuffered = 64 << 10
	maxMaxBuffered = 1 << 40
	minRate        = 1 << 10
	maxRate        = 1 << 40
)

// OptionError reports an unusable field of ServiceOptions or
// ClientOptions, so that configuration code can say which knob is wrong.
type OptionError struct {
	Field  string // the field, e.g. "ServiceOptions.SubjectPrefix"
	Value  any    // the rejected value
	Reason string // why it was rejected
}

// Error implements error.
func (e *OptionError) Error() string {
	return fmt.Sprintf("remote: invalid %s (%v): %s", e.Field, e.Value, e.Reason)
}

// ServiceOptions configure the services a store's owner runs: ServeStore
// and ServeOracle. One value usually serves both, since a deployment
// gives them the same subject prefix, logger and store id; the fields
// that concern one service only say so. The zero value (or nil) is valid:
// EnsureDefaults fills in every unset field, and each field documents its
// default.
type ServiceOptions struct {
	// SubjectPrefix is the namespace of the subjects, so that several
	// deployments can share a NATS system: one or more dot-separated
	// tokens without wildcards or spaces. Clients must use the same.
	// Default: DefaultPrefix ("trickle").
	SubjectPrefix string

	// QueueGroup is the queue group of the endpoints: each request goes
	// to one member of the group. A token without wildcards or spaces.
	// Default: DefaultQueueGroup ("trickle").
	QueueGroup string

	// Logger receives the services' log messages.
	// Default: slog.Default().
	Logger *slog.Logger

	// HandlerTimeout caps how long a service works on one request, and
	// how long it keeps a message in parts; the client's own timeout
	// applies if shorter. Between 1ms and 1h.
	// Default: DefaultHandlerTimeout (1m).
	HandlerTimeout time.Duration

	// StoreConcurrency caps how many requests the store service handles
	// at once (1..MaxConcurrency); further requests wait in the NATS
	// subscription's pending queue. Used by ServeStore.
	// Default: DefaultStoreConcurrency (64).
	StoreConcurrency int

	// OracleConcurrency caps how many requests the oracle service handles
	// at once (1..MaxConcurrency). Used by ServeOracle.
	// Default: DefaultOracleConcurrency (1).
	OracleConcurrency int

	// MaxBufferedBytes caps the memory the store service holds for
	// messages too large for one NATS message, which travel in parts:
	// uploads still arriving and answers not yet fetched. A request or
	// answer larger than the cap fails with ErrTooLarge, one that does not
	// fit next to those in progress with ErrBusy. Between 64 KiB and
	// 1 TiB. Used by ServeStore (the oracle's messages always fit in one).
	// Default: DefaultMaxBufferedBytes (256 MiB).
	MaxBufferedBytes int64

	// StoreID makes the store service announce which store it serves, and
	// both services refuse requests meant for another store: an identifier
	// kept with the data (a runner keeps one in its data directory), at
	// most 1024 bytes of UTF-8. Clients compare it with the store they
	// expect (StoreClient.Identity, StoreClient.Expect), so that one
	// reaching the wrong deployment, say through a mistyped port, fails
	// instead of writing into it.
	// Default: "" (none; Identity then returns "").
	StoreID string

	// Oracle, if set, lets the store service choose the timestamp of a
	// read (StoreClient.ReadRowsNow) or of a row transaction's mutations
	// (StoreClient.ApplyNow) itself: it draws the timestamp from Oracle
	// while serving the request, so that a transaction's snapshot and
	// commit timestamp cost no round trip to the oracle. It must be the oracle every client of the store draws its
	// timestamps from, the one ServeOracle serves beside this store (a
	// runner passes its own); any other breaks snapshot isolation. Used
	// by ServeStore.
	// Default: nil (ReadRowsNow and ApplyNow fail with an error matching
	// errors.ErrUnsupported, and callers draw timestamps themselves).
	Oracle oracle.Reserver

	// StoreWhere says where the store lives, for messages (for example
	// "host:/var/lib/trickle"); at most 1024 bytes of UTF-8, and only
	// with StoreID.
	// Default: "".
	StoreWhere string

	// now is the clock of transfer expiry; tests replace it.
	// Default: time.Now.
	now func() time.Time
	// onExpire, if set, is called (with the transfer table locked) for
	// every transfer dropped at its deadline; tests use it to learn that
	// the expiry timer ran. Default: nil.
	onExpire func(id uint64, upload bool)
	// onStopWait, if set, is called (with the server's mutex held) each
	// time Stop blocks waiting for running handlers, with how many run;
	// tests use it to know that Stop is waiting rather than guess.
	onStopWait func(inflight int)
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *ServiceOptions) EnsureDefaults() *ServiceOptions {
	if o.SubjectPrefix == "" {
		o.SubjectPrefix = DefaultPrefix
	}
	if o.QueueGroup == "" {
		o.QueueGroup = DefaultQueueGroup
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.HandlerTimeout == 0 {
		o.HandlerTimeout = DefaultHandlerTimeout
	}
	if o.StoreConcurrency == 0 {
		o.StoreConcurrency = DefaultStoreConcurrency
	}
	if o.OracleConcurrency == 0 {
		o.OracleConcurrency = DefaultOracleConcurrency
	}
	if o.MaxBufferedBytes == 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o
}

// Validate reports the first unusable field as an *OptionError. Call it
// after EnsureDefaults (ServeStore and ServeOracle do both): fields left
// unset are reported, not defaulted.
func (o *ServiceOptions) Validate() error {
	const t = "ServiceOptions."
	if err := validatePrefix(t+"SubjectPrefix", o.SubjectPrefix); err != nil {
		return err
	}
	switch {
	case !validToken(o.QueueGroup):
		return &OptionError{Field: t + "QueueGroup", Value: o.QueueGroup, Reason: "must be a non-empty token without spaces or wildcards"}
	case o.Logger == nil:
		return &OptionError{Field: t + "Logger", Value: "nil", Reason: "must be set (call EnsureDefaults)"}
	case o.HandlerTimeout < minTimeout || o.HandlerTimeout > maxTimeout:
		return &OptionError{Field: t + "HandlerTimeout", Value: o.HandlerTimeout, Reason: "must be between 1ms and 1h"}
	case o.StoreConcurrency < 1 || o.StoreConcurrency > MaxConcurrency:
		return &OptionError{Field: t + "StoreConcurrency", Value: o.StoreConcurrency, Reason: fmt.Sprintf("must be 1..%d", MaxConcurrency)}
	case o.OracleConcurrency < 1 || o.OracleConcurrency > MaxConcurrency:
		return &OptionError{Field: t + "OracleConcurrency", Value: o.OracleConcurrency, Reason: fmt.Sprintf("must be 1..%d", MaxConcurrency)}
	case o.MaxBufferedBytes < minMaxBuffered || o.MaxBufferedBytes > maxMaxBuffered:
		return &OptionError{Field: t + "MaxBufferedBytes", Value: o.MaxBufferedBytes, Reason: "must be 64 KiB..1 TiB"}
	case len(o.StoreID) > maxIdentity || !utf8.ValidString(o.StoreID):
		return &OptionError{Field: t + "StoreID", Value: o.StoreID, Reason: fmt.Sprintf("must be at most %d bytes of UTF-8", maxIdentity)}
	case len(o.StoreWhere) > maxIdentity || !utf8.ValidString(o.StoreWhere):
		return &OptionError{Field: t + "StoreWhere", Value: o.StoreWhere, Reason: fmt.Sprintf("must be at most %d bytes of UTF-8", maxIdentity)}
	case o.StoreWhere != "" && o.StoreID == "":
		return &OptionError{Field: t + "StoreWhere", Value: o.StoreWhere, Reason: "is set without StoreID"}
	}
	return nil
}

// ClientOptions configure the clients every other process uses: NewStore
// and NewOracle. The zero value (or nil) is valid: EnsureDefaults fills in
// every unset field, and each field documents its default.
type ClientOptions struct {
	// SubjectPrefix is the namespace of the subjects; it must be the
	// services' (see ServiceOptions.SubjectPrefix).
	// Default: DefaultPrefix ("trickle").
	SubjectPrefix string

	// RequestTimeout is how long a client waits for an answer when the
	// caller's context has no earlier deadline. Between 1ms and 1h.
	// Default: DefaultRequestTimeout (10s).
	RequestTimeout time.Duration

	// ScanPageCells is how many cells a StoreClient's Scan asks for per
	// page (1..MaxScanPageCells): larger pages mean fewer round trips but
	// more cells fetched that a consumer which stops early never sees.
	// Used by NewStore.
	// Default: DefaultScanPageCells (1024).
	ScanPageCells int

	// MaxBufferedBytes is the largest answer a StoreClient accepts in
	// parts; a larger one fails with ErrTooLarge. Between 64 KiB and
	// 1 TiB. Used by NewStore (the oracle's answers always fit in one
	// message).
	// Default: DefaultMaxBufferedBytes (256 MiB).
	MaxBufferedBytes int64

	// MinTransferRate, in bytes per second, is the slowest a request or
	// answer too large for one message (sent in parts) may travel and be
	// handled: such a request gets RequestTimeout plus its size at this
	// rate (an answer in parts: from its first part on), within the
	// caller's deadline, if any. RequestTimeout alone would fail large
	// pages on a slow link or a busy service. Each part but the one the
	// answer waits for must still be answered within RequestTimeout, so a
	// vanished peer is noticed as soon as with small requests. A service
	// still keeps a transfer for at most its HandlerTimeout. Between
	// 1 KiB/s and 1 TiB/s.
	// Default: DefaultMinTransferRate (1 MiB/s).
	MinTransferRate int64
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *ClientOptions) EnsureDefaults() *ClientOptions {
	if o.SubjectPrefix == "" {
		o.SubjectPrefix = DefaultPrefix
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.ScanPageCells == 0 {
		o.ScanPageCells = DefaultScanPageCells
	}
	if o.MaxBufferedBytes == 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if o.MinTransferRate == 0 {
		o.MinTransferRate = DefaultMinTransferRate
	}
	return o
}

// Validate reports the first unusable field as an *OptionError. Call it
// after EnsureDefaults (NewStore and NewOracle do both).
func (o *ClientOptions) Validate() error {
	const t = "ClientOptions."
	if err := validatePrefix(t+"SubjectPrefix", o.SubjectPrefix); err != nil {
		return err
	}
	switch {
	case o.RequestTimeout < minTimeout || o.RequestTimeout > maxTimeout:
		return &OptionError{Field: t + "RequestTimeout", Value: o.RequestTimeout, Reason: "must be between 1ms and 1h"}
	case o.ScanPageCells < 1 || o.ScanPageCells > MaxScanPageCells:
		return &OptionError{Field: t + "ScanPageCells", Value: o.ScanPageCells, Reason: fmt.Sprintf("must be 1..%d", MaxScanPageCells)}
	case o.MaxBufferedBytes < minMaxBuffered || o.MaxBufferedBytes > maxMaxBuffered:
		return &OptionError{Field: t + "MaxBufferedBytes", Value: o.MaxBufferedBytes, Reason: "must be 64 KiB..1 TiB"}
	case o.MinTransferRate < minRate || o.MinTransferRate > maxRate:
		return &OptionError{Field: t + "MinTransferRate", Value: o.MinTransferRate, Reason: "must be 1 KiB/s..1 TiB/s"}
	}
	return nil
}

// serviceOptions returns a defaulted, validated copy of opts (nil: all
// defaults), so that later changes by the caller do not reach a service.
func serviceOptions(opts *ServiceOptions) (*ServiceOptions, error) {
	var o ServiceOptions
	if opts != nil {
		o = *opts
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	return &o, nil
}

// clientOptions is serviceOptions for ClientOptions.
func clientOptions(opts *ClientOptions) (*ClientOptions, error) {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	return &o, nil
}

// subject returns the subject of endpoint name of service svc under prefix.
func subject(prefix, svc, name string) string { return prefix + "." + svc + "." + name }

// validToken reports whether s is a usable NATS subject token.
func validToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\r\n.*>")
}

// validatePrefix checks a subject prefix: dot-separated valid tokens.
func validatePrefix(field, prefix string) error {
	for tok := range strings.SplitSeq(prefix, ".") {
		if !validToken(tok) {
			return &OptionError{Field: field, Value: prefix,
				Reason: "must be dot-separated non-empty tokens without spaces or wildcards"}
		}
	}
	return nil
}
