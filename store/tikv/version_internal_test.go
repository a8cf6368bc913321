package tikv

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pingcap/kvproto/pkg/metapb"
	"github.com/tikv/pd/client/clients/gc"
	"github.com/tikv/pd/client/opt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The tests of this file check one rule: Open runs only on a cluster that
// serves what the collection needs, TiKV and PD MinClusterVersion or
// later with PD's GC-states API, and says which version it found when
// not.

// fakePD answers the version check as a cluster of the given store
// versions whose GetGCState fails with gcErr.
type fakePD struct {
	versions []string
	gcErr    error
}

func (f fakePD) GetAllStores(context.Context, ...opt.GetStoreOption) ([]*metapb.Store, error) {
	var out []*metapb.Store
	for i, v := range f.versions {
		out = append(out, &metapb.Store{Id: uint64(i + 1), Address: "tikv-" + string(rune('a'+i)) + ":20160", Version: v})
	}
	return out, nil
}

func (f fakePD) GetGCStatesClient(uint32) gc.GCStatesClient { return fakeGCStates{err: f.gcErr} }

// fakeGCStates is a GC-states client whose GetGCState fails with err;
// the check calls nothing else.
type fakeGCStates struct {
	gc.GCStatesClient
	err error
}

func (f fakeGCStates) GetGCState(context.Context) (gc.GCState, error) { return gc.GCState{}, f.err }

func TestOpenChecksTheClusterVersion(t *testing.T) {
	unimplemented := status.Error(codes.Unimplemented, "unknown method GetGCState for service pdpb.PD")
	for _, tc := range []struct {
		name     string
		pd       fakePD
		want     error    // nil: supported
		mentions []string // in the error
	}{
		{"supported", fakePD{versions: []string{"9.0.0", "v9.1.2", "9.0.0-nextgen.202510"}}, nil, nil},
		{"a store too old", fakePD{versions: []string{"9.1.0", "8.5.1"}}, ErrUnsupportedVersion, []string{"8.5.1", "store 2", MinClusterVersion}},
		{"a store reporting no version", fakePD{versions: []string{""}}, ErrUnsupportedVersion, []string{"no version", MinClusterVersion}},
		{"PD without the GC-states API", fakePD{versions: []string{"9.0.0"}, gcErr: unimplemented}, ErrUnsupportedVersion, []string{"GC-states API", MinClusterVersion}},
	} {
		err := checkCluster(context.Background(), tc.pd)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want none", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			continue
		}
		for _, m := range tc.mentions {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: %q does not mention %q", tc.name, err, m)
			}
		}
	}
	// PD failing otherwise is not a version problem.
	err := checkCluster(context.Background(), fakePD{versions: []string{"9.0.0"}, gcErr: errors.New("no leader")})
	if err == nil || errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("GetGCState failing for another reason: %v, want an error that is not ErrUnsupportedVersion", err)
	}
}

func TestVersionsCompareByMajorMinorPatch(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"9.0.0", true}, {"v9.0.0", true}, {"9.0.0-beta.1", true}, {"10.0.0", true}, {"9.0.1", true},
		{"8.5.1", false}, {"v8.5.4", false}, {"", false}, {"nine", false}, {"9.0", false},
	} {
		if got := atLeast(tc.v, MinClusterVersion); got != tc.want {
			t.Errorf("atLeast(%q, %q) = %v, want %v", tc.v, MinClusterVersion, got, tc.want)
		}
	}
}
