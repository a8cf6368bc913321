package tikv

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trickle-dev/trickle/store"
)

// Defaults of Options.
const (
	DefaultNamespace          = "trickle"
	DefaultConnectTimeout     = 10 * time.Second
	DefaultRequestTimeout     = 30 * time.Second
	DefaultMaxConflictRetries = 64
	DefaultRetryBackoffMin    = time.Millisecond
	DefaultRetryBackoffMax    = 100 * time.Millisecond
	DefaultScanBatchSize      = 256
)

// Options configures Open and New. The zero value (or nil) is valid:
// EnsureDefaults fills in every unset field, and each field documents its
// default.
type Options struct {
	// Namespace separates stores sharing a cluster: every key of the store
	// starts with it. It must not contain a 0x00 byte.
	// Default: DefaultNamespace.
	Namespace string

	// Groups maps column families to locality groups, as
	// store.Options.Groups does; the layout is persisted in the cluster at
	// the first open and later opens fail with store.ErrGroupLayout if
	// they would move a family. Default: none.
	Groups map[string]string

	// Logger receives the store's log messages. Open also routes the TiKV
	// client's own log (which is process-wide) to its handler; see
	// RouteClientLogs. Default: slog.Default().
	Logger *slog.Logger

	// ConnectTimeout bounds Open's wait for PD and TiKV.
	// Default: DefaultConnectTimeout.
	ConnectTimeout time.Duration

	// RequestTimeout bounds every operation whose context has no earlier
	// deadline, so that an unreachable cluster ends in an error rather
	// than a hang. Default: DefaultRequestTimeout.
	RequestTimeout time.Duration

	// BarrierTTL is the TTL of the GC barrier held on PD while the TiKV
	// transaction engine runs on the store (framework.EngineTiKV): how long a
	// process that died holds the cluster's collections back, and how long
	// one may be paused or cut off from PD before its transactions fail.
	// Default: tikvengine's, 5 minutes.
	BarrierTTL time.Duration

	// MaxConflictRetries bounds how often a row transaction is evaluated
	// again after a TiKV write conflict with a concurrent one on its row.
	// Default: DefaultMaxConflictRetries.
	MaxConflictRetries int

	// RetryBackoffMin and RetryBackoffMax bound the randomized exponential
	// backoff between those attempts. Defaults: DefaultRetryBackoffMin and
	// DefaultRetryBackoffMax.
	RetryBackoffMin, RetryBackoffMax time.Duration

	// ScanBatchSize is how many keys a scan fetches per TiKV request.
	// Default: DefaultScanBatchSize.
	ScanBatchSize int

	// CAPath, CertPath and KeyPath name PEM files for TLS to PD and TiKV:
	// the CA that signed the cluster's certificates, and this client's
	// certificate and key. All three or none. Only Open uses them.
	// Default: none (plaintext).
	CAPath, CertPath, KeyPath string

	// Metrics, if set, is where Open registers the TiKV client's
	// prometheus metrics (process-wide; see RegisterMetrics).
	// Default: nil, the metrics are not registered anywhere.
	Metrics prometheus.Registerer

	// SafePoint names the cell holding the safe point, as
	// store.Options.SafePoint does: a row transaction whose Snapshot is
	// below the safe point its TiKV snapshot reads is refused (see
	// store.RowTxn.Snapshot). Default: none — no row transaction is
	// refused.
	SafePoint *store.SafePointCell
}

// EnsureDefaults fills in defaults for unset fields. It copies Groups.
func (o *Options) EnsureDefaults() {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	o.Groups = maps.Clone(o.Groups)
	if o.Groups == nil {
		o.Groups = map[string]string{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MaxConflictRetries == 0 {
		o.MaxConflictRetries = DefaultMaxConflictRetries
	}
	if o.RetryBackoffMin == 0 {
		o.RetryBackoffMin = DefaultRetryBackoffMin
	}
	if o.RetryBackoffMax == 0 {
		o.RetryBackoffMax = DefaultRetryBackoffMax
	}
	if o.ScanBatchSize == 0 {
		o.ScanBatchSize = DefaultScanBatchSize
	}
}

// Validate reports whether the options are usable. Call it after
// EnsureDefaults (Open and New do both).
func (o *Options) Validate() error {
	switch {
	case o.Namespace == "":
		return errors.New("store/tikv: Options.Namespace is empty")
	case strings.IndexByte(o.Namespace, 0) >= 0:
		return fmt.Errorf("store/tikv: Options.Namespace %q contains a 0x00 byte", o.Namespace)
	case o.Logger == nil:
		return errors.New("store/tikv: Options.Logger is nil")
	case o.ConnectTimeout < 0:
		return fmt.Errorf("store/tikv: Options.ConnectTimeout is negative (%v)", o.ConnectTimeout)
	case o.RequestTimeout < 0:
		return fmt.Errorf("store/tikv: Options.RequestTimeout is negative (%v)", o.RequestTimeout)
	case o.MaxConflictRetries < 0:
		return fmt.Errorf("store/tikv: Options.MaxConflictRetries is negative (%d)", o.MaxConflictRetries)
	case o.RetryBackoffMin < 0 || o.RetryBackoffMax < o.RetryBackoffMin:
		return fmt.Errorf("store/tikv: Options.RetryBackoffMin %v and RetryBackoffMax %v are not a range", o.RetryBackoffMin, o.RetryBackoffMax)
	case o.ScanBatchSize < 1:
		return fmt.Errorf("store/tikv: Options.ScanBatchSize is %d, want at least 1", o.ScanBatchSize)
	}
	if n := btoi(o.CAPath != "") + btoi(o.CertPath != "") + btoi(o.KeyPath != ""); n != 0 && n != 3 {
		return fmt.Errorf("store/tikv: Options.CAPath %q, CertPath %q, KeyPath %q: set all three for TLS, or none", o.CAPath, o.CertPath, o.KeyPath)
	}
	if sp := o.SafePoint; sp != nil && (sp.Table == "" || len(sp.Row) == 0 || sp.Column.Family == "") {
		return fmt.Errorf("store/tikv: Options.SafePoint names an incomplete cell %s/%q/%s", sp.Table, sp.Row, sp.Column)
	}
	for fam, g := range o.Groups {
		if fam == "" {
			return errors.New("store/tikv: Options.Groups maps the empty family")
		}
		if g == "" {
			return fmt.Errorf("store/tikv: Options.Groups maps family %q to the empty group name", fam)
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
