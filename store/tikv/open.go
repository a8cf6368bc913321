package tikv

import (
	"context"
	"fmt"
	"strings"

	"github.com/tikv/client-go/v2/config"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	pd "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/opt"
	"github.com/tikv/pd/client/pkg/caller"
)

// Open connects to the TiKV cluster whose PD endpoints are pdAddrs
// (host:port) and opens the store in it. It waits at most
// Options.ConnectTimeout (and no longer than ctx allows) and fails with an
// error naming the PD addresses if the cluster does not answer. opts may
// be nil; it is copied.
//
// It fails with ErrUnsupportedVersion, naming the version it found, on a
// cluster whose TiKV stores are older than MinClusterVersion or whose PD
// does not serve the GC-states API the collection uses. (New, given a
// client a caller made, such as a test's in-process mock, checks
// nothing.)
func Open(ctx context.Context, pdAddrs []string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(pdAddrs) == 0 {
		return nil, fmt.Errorf("store/tikv: Open: no PD address")
	}
	RouteClientLogs(o.Logger.Handler())
	if o.Metrics != nil {
		if err := RegisterMetrics(o.Metrics); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	type result struct {
		kv  *tikvclient.KVStore
		err error
	}
	done := make(chan result, 1)
	go func() {
		kv, err := connect(ctx, pdAddrs, &o)
		done <- result{kv, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		// The client keeps trying in the background: close what it
		// makes once it gives up or succeeds.
		go func() {
			if r := <-done; r.kv != nil {
				r.kv.Close()
			}
		}()
		return nil, fmt.Errorf("store/tikv: connecting to PD at %s: %w", strings.Join(pdAddrs, ","), context.Cause(ctx))
	}
	if r.err != nil {
		return nil, fmt.Errorf("store/tikv: connecting to PD at %s: %w", strings.Join(pdAddrs, ","), r.err)
	}
	s, err := newStore(ctx, r.kv, o, true)
	if err != nil {
		r.kv.Close()
		return nil, fmt.Errorf("store/tikv: opening the store at PD %s: %w", strings.Join(pdAddrs, ","), err)
	}
	return s, nil
}

// connect makes the TiKV client: a PD client (with TLS if configured),
// checked to serve a cluster of a supported version (see
// MinClusterVersion), the safe-point store in PD's etcd, and the RPC
// client of the TiKV nodes.
func connect(ctx context.Context, pdAddrs []string, o *Options) (*tikvclient.KVStore, error) {
	sec := config.Security{ClusterSSLCA: o.CAPath, ClusterSSLCert: o.CertPath, ClusterSSLKey: o.KeyPath}
	pdc, err := pd.NewClientWithContext(ctx, caller.Component("trickle"), pdAddrs,
		pd.SecurityOption{CAPath: o.CAPath, CertPath: o.CertPath, KeyPath: o.KeyPath},
		opt.WithCustomTimeoutOption(o.ConnectTimeout))
	if err != nil {
		return nil, err
	}
	if err := checkCluster(ctx, pdc); err != nil {
		pdc.Close()
		return nil, err
	}
	codecPD := tikvclient.NewCodecPDClient(tikvclient.ModeTxn, pdc)
	tlsConfig, err := sec.ToTLSConfig()
	if err != nil {
		pdc.Close()
		return nil, fmt.Errorf("TLS: %w", err)
	}
	spkv, err := tikvclient.NewEtcdSafePointKV(pdAddrs, tlsConfig)
	if err != nil {
		pdc.Close()
		return nil, err
	}
	rpc := tikvclient.NewRPCClient(tikvclient.WithSecurity(sec), tikvclient.WithCodec(codecPD.GetCodec()))
	kv, err := tikvclient.NewKVStore(fmt.Sprintf("tikv-%d", pdc.GetClusterID(ctx)), codecPD, spkv, rpc)
	if err != nil {
		rpc.Close()
		spkv.Close()
		pdc.Close()
		return nil, err
	}
	return kv, nil
}
