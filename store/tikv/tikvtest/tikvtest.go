// Package tikvtest runs stores of package tikv on client-go's in-process
// mock TiKV cluster (one region or several), so that any package's tests
// can run on TiKV without a cluster: the mock speaks the same RPCs to the
// same client, regions, MVCC and locks included, in memory. Two things
// are changed. So that tests run the commit paths a real cluster runs, the
// mock commits asynchronously and in one phase, as TiKV does, where on its
// own it falls back to two phases (see commits; Options.TwoPhaseOnly
// turns it off). And so that long runs measure the code under test rather
// than the mock, a lock resolution is served by the locks' keys, as TiKV
// serves it, not by reading the whole region (see locks).
package tikvtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tikv/client-go/v2/testutils"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	pd "github.com/tikv/pd/client"

	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store/tikv"
)

// Options shape a mock cluster. The zero value (or nil) is a one-region
// cluster for the default namespace.
type Options struct {
	// Namespace is the namespace whose key space SplitRows splits.
	// Default: tikv.DefaultNamespace.
	Namespace string
	// SplitRows, if not empty, splits the key space into regions: at the
	// start of the first locality groups, and at each of these rows of
	// each table in the default group and the next one (the framework's
	// notifications), so that transactions of those tables and scans for
	// their notifications cross region boundaries. Default: none, one
	// region.
	SplitRows map[string][][]byte
	// SplitKeys, if not empty, splits the key space at each of these
	// keys as well, taken as they are: where SplitRows does not reach,
	// such as the key range of the engine whose transactions are TiKV's
	// (tikvengine.RowKey under tikv.EngineNamespace). Default: none.
	SplitKeys [][]byte
	// Latency is added to every request of the cluster's clients, to
	// simulate a cluster across a network (see DataCentre). Default: none.
	Latency Latency
	// MeasureServerCPU has the cluster count the CPU it spends serving
	// requests (see Cluster.ServerCPU), at the cost of pinning each
	// request's goroutine to its thread while it is served, and of the
	// build being Linux (elsewhere nothing is counted). Default: false.
	MeasureServerCPU bool
	// TwoPhaseOnly has the cluster commit as client-go's mock does on its
	// own: a prewrite that asks for async commit or one-phase commit is
	// answered as an ordinary one, so the client falls back and commits
	// every transaction in two phases (for comparison with the default).
	// Default: false, the cluster commits the way TiKV does, in one phase
	// or asynchronously when the client asks to (see commits).
	TwoPhaseOnly bool
}

// Cluster is a mock TiKV cluster and a client of it, closed when the test
// ends (New) or by Close (Start).
type Cluster struct {
	// KV is the client, for tikv.New (and runner.TiKVOptions.Client).
	KV   *tikvclient.KVStore
	reqs requests
	lat  atomic.Pointer[Latency]
	cpu  serverCPU
	// locks has the mock resolve locks by their keys, as TiKV does.
	locks locks
	// commits has the mock commit asynchronously and in one phase, as
	// TiKV does.
	commits commits
	// mvcc is the mock's store, which collect collects up to the safe
	// point PD was last given (collected).
	mvcc      testutils.MVCCStore
	gc        sync.Mutex
	collected uint64

	rpc tikvclient.Client // the mock cluster's RPC endpoint
	pd  pd.Client
	// clockAhead is how far PD's clock was moved ahead (see
	// AdvanceClock), in milliseconds.
	clockAhead atomic.Int64
	// barriers keeps the TTLs of PD's GC barriers (see gcstates.go).
	barriers barriers
	// failTS counts the timestamps still to fail (see FailTimestamps).
	failTS atomic.Int64
}

// AdvanceClock moves PD's clock ahead by d: every timestamp the cluster
// hands out from now on carries a physical time d later, so that locks
// (whose TTLs TiKV judges on the timestamps' clock) expire when a test
// says, without waiting. The clock never moves back.
func (c *Cluster) AdvanceClock(d time.Duration) {
	if d > 0 {
		c.clockAhead.Add(d.Milliseconds())
	}
}

// quiet keeps the client's process-wide log out of test output unless a
// store's owner routes it elsewhere.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// New starts a mock cluster, closed when the test ends.
func New(t testing.TB, o *Options) *Cluster {
	t.Helper()
	c, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Start starts a mock cluster outside a test (a soak command's): Close
// ends it.
func Start(o *Options) (*Cluster, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Namespace == "" {
		opts.Namespace = tikv.DefaultNamespace
	}
	if err := opts.Latency.validate(); err != nil {
		return nil, err
	}
	tikv.RouteClientLogs(quiet.Handler())
	client, cluster, pdClient, err := testutils.NewMockTiKV("", nil)
	if err != nil {
		return nil, fmt.Errorf("tikvtest: %w", err)
	}
	if err := tuneStorage(client.MvccStore); err != nil {
		client.Close()
		return nil, err
	}
	if splits := splitKeys(opts); len(splits) > 0 {
		testutils.BootstrapWithMultiRegions(cluster, splits...)
	} else {
		testutils.BootstrapWithSingleStore(cluster)
	}
	c := &Cluster{rpc: client, pd: pdClient, locks: locks{mock: cluster}, mvcc: client.MvccStore}
	if err := c.commits.init(client.MvccStore, !opts.TwoPhaseOnly); err != nil {
		client.Close()
		return nil, err
	}
	c.cpu.on = opts.MeasureServerCPU
	c.lat.Store(&opts.Latency)
	kv, err := tikvclient.NewTestTiKVStore(client, c.timestamps(pdClient), c.counting, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("tikvtest: %w", err)
	}
	c.KV = kv
	return c, nil
}

// Close closes the cluster's client (and so its RPC endpoint, which every
// client of NewClient shares: close those first).
func (c *Cluster) Close() error { return c.KV.Close() }

// Client returns another client of the cluster (see NewClient), closed
// when the test ends, before the cluster.
func (c *Cluster) Client(t testing.TB, hijack func(tikvclient.Client) tikvclient.Client) *tikvclient.KVStore {
	t.Helper()
	kv, err := c.NewClient(hijack)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv
}

// NewClient returns another client of the cluster, as another process
// would have: its own region cache, lock resolver and safe point cache,
// the cluster's PD and TiKV nodes shared. hijack, if not nil, wraps its
// RPCs to the TiKV nodes (to fail, delay or drop them, say; PD's
// timestamps do not go through it). It is for code outside a test (a soak
// command's) that starts and ends clients as processes come and go: the
// caller closes it, before the cluster; closing it leaves the cluster and
// its other clients running.
func (c *Cluster) NewClient(hijack func(tikvclient.Client) tikvclient.Client) (*tikvclient.KVStore, error) {
	kv, err := tikvclient.NewTestTiKVStore(noClose{c.rpc}, c.timestamps(c.pd), func(inner tikvclient.Client) tikvclient.Client {
		cl := c.counting(inner)
		if hijack != nil {
			cl = hijack(cl)
		}
		return cl
	}, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("tikvtest: %w", err)
	}
	return kv, nil
}

// noClose shares the cluster's RPC endpoint: the cluster's own client
// closes it.
type noClose struct{ tikvclient.Client }

func (noClose) Close() error { return nil }

// splitKeys returns the region split keys o describes (SplitRows and
// SplitKeys), in ascending order, no key twice.
func splitKeys(o Options) [][]byte {
	out := append(Splits(o.Namespace, o.SplitRows), o.SplitKeys...)
	slices.SortFunc(out, bytes.Compare)
	return slices.CompactFunc(out, bytes.Equal)
}

// Splits returns the region split keys Options.SplitRows describes, in
// ascending order.
func Splits(namespace string, rows map[string][][]byte) [][]byte {
	if len(rows) == 0 {
		return nil
	}
	ns := append([]byte(namespace), 0)
	var out [][]byte
	for g := keys.DefaultGroup; g <= keys.FirstExtraGroup+1; g++ {
		out = append(out, append(append([]byte(nil), ns...), byte(g)))
		if g > keys.FirstExtraGroup {
			continue // past the framework's groups (data and notifications)
		}
		for table, rs := range rows {
			for _, r := range rs {
				out = append(out, keys.AppendRowPrefix(append([]byte(nil), ns...), g, table, r))
			}
		}
	}
	// Each split divides the region made by the one before: ascending,
	// and no key twice.
	slices.SortFunc(out, bytes.Compare)
	return slices.CompactFunc(out, bytes.Equal)
}

// Open opens a store on the cluster, closed when the test ends. opts may
// be nil; unset Groups are the framework's (protocol.Groups), as is an
// unset SafePoint, and the logger discards.
func (c *Cluster) Open(t testing.TB, opts *tikv.Options) *tikv.Store {
	t.Helper()
	s, err := c.OpenStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// OpenStore is Open outside a test: the caller closes the store.
func (c *Cluster) OpenStore(opts *tikv.Options) (*tikv.Store, error) {
	return storeOn(c.KV, opts)
}

// OpenProcess opens a store on another client of the cluster (see
// Client), as another process of a deployment would, closed when the test
// ends: a test or benchmark runs several runner nodes on one cluster
// with it.
func (c *Cluster) OpenProcess(t testing.TB, opts *tikv.Options) *tikv.Store {
	t.Helper()
	s, err := storeOn(c.Client(t, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// storeOn opens a store on kv with the framework's defaults.
func storeOn(kv *tikvclient.KVStore, opts *tikv.Options) (*tikv.Store, error) {
	var o tikv.Options
	if opts != nil {
		o = *opts
	}
	if o.Groups == nil {
		o.Groups = protocol.Groups()
	}
	if o.SafePoint == nil {
		sp := protocol.SafePoint
		o.SafePoint = &sp
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	return tikv.New(context.Background(), kv, &o)
}

// RPCs returns how many RPCs the client has sent to the cluster's TiKV
// nodes (PD's timestamps not included), for benchmarks that report them.
func (c *Cluster) RPCs() int64 { return c.reqs.total.Load() }

// String names the cluster in test output.
func (c *Cluster) String() string { return fmt.Sprintf("mock TiKV (%d RPCs)", c.RPCs()) }

// counting wraps a client's RPCs to count them and delay them by the
// cluster's latency.
func (c *Cluster) counting(inner tikvclient.Client) tikvclient.Client {
	return &counting{Client: inner, c: c}
}

// timestamps wraps the PD client a client is made with (client-go wraps
// it in turn) to count its timestamps and delay them by the cluster's
// latency.
func (c *Cluster) timestamps(inner pd.Client) pd.Client {
	return &timestamps{Client: inner, c: c}
}
