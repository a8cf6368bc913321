package tikv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/clients/gc"
	"github.com/tikv/pd/client/constants"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MinClusterVersion is the oldest TiKV and PD release the store and the
// TiKV engine run on. Their collection advances TiKV's transaction safe
// point through PD's GC-states API (AdvanceTxnSafePoint, GetGCState, GC
// barriers), which PD serves from 9.0 on; older clusters have only the
// service safe points client-go no longer drives.
const MinClusterVersion = "9.0.0"

// ErrUnsupportedVersion is matched by the error of Open on a cluster
// older than MinClusterVersion, or whose PD does not serve the GC-states
// API: the error names the version found.
var ErrUnsupportedVersion = errors.New("store/tikv: unsupported TiKV/PD version")

// clusterInfo is what the version check asks of PD.
type clusterInfo interface {
	GetAllStores(ctx context.Context, opts ...opt.GetStoreOption) ([]*metapb.Store, error)
	GetGCStatesClient(keyspaceID uint32) gc.GCStatesClient
}

// checkCluster fails with ErrUnsupportedVersion unless every TiKV store
// of the cluster (tombstones aside) runs MinClusterVersion or later and
// PD answers the GC-states API. Open runs it on the cluster it dials; a
// client passed to New (a test's mock, which reports no versions) is not
// checked.
func checkCluster(ctx context.Context, pd clusterInfo) error {
	stores, err := pd.GetAllStores(ctx, opt.WithExcludeTombstone())
	if err != nil {
		return fmt.Errorf("store/tikv: listing the TiKV stores to check their versions: %w", err)
	}
	if len(stores) == 0 {
		return fmt.Errorf("store/tikv: PD lists no TiKV store")
	}
	for _, s := range stores {
		if !atLeast(s.GetVersion(), MinClusterVersion) {
			found := s.GetVersion()
			if found == "" {
				found = "no version"
			}
			return fmt.Errorf("%w: TiKV store %d at %s runs %s; trickle needs TiKV and PD %s or later", ErrUnsupportedVersion, s.GetId(), s.GetAddress(), found, MinClusterVersion)
		}
	}
	if _, err := pd.GetGCStatesClient(constants.NullKeyspaceID).GetGCState(ctx); err != nil {
		if status.Code(err) == codes.Unimplemented || strings.Contains(err.Error(), "Unimplemented") {
			return fmt.Errorf("%w: PD does not serve the GC-states API (GetGCState: %v), which trickle's collection needs: upgrade PD to %s or later", ErrUnsupportedVersion, err, MinClusterVersion)
		}
		return fmt.Errorf("store/tikv: reading PD's GC state: %w", err)
	}
	return nil
}

// atLeast reports whether version v (such as "9.0.0", "v9.1.0-beta.1" or
// "9.0.0-nextgen.202510") is min or later, by major, minor and patch: a
// pre-release of a version counts as that version, and PD's answer to the
// GC-states API settles the rest.
func atLeast(v, min string) bool {
	a, ok := parseVersion(v)
	b, _ := parseVersion(min)
	if !ok {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

// parseVersion returns the major, minor and patch of v.
func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
