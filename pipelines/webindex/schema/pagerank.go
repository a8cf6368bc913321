package schema

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/trickle-dev/trickle/framework"
)

// MaxPROutlinks bounds the outlinks that carry rank: a page with more
// pushes through only the first MaxPROutlinks of its loaded targets (in
// URL order), so that a push, which writes one cell per target and is
// repeated for every residual above the tolerance, stays bounded however
// large a generated sitemap is.
const MaxPROutlinks = 10_000

// Cells of the PageRank, all on PagesTable rows.
var (
	// PRStateCol holds a URL's PageRank state (an encoded PRState): its
	// rank estimate, its folded residual, whether it receives the
	// teleport share, and the outlinks its rank was last sent along. All
	// four change together: the corrections a change of outlinks sends
	// depend on the rank, so a push and a change of outlinks must not both
	// commit from one snapshot.
	PRStateCol = framework.Column{Family: "pr", Qualifier: "state"}
	// PRDeltaFamily queues residual sent to a URL, one cell per sending
	// transaction and source (qualifier: start timestamp and source), so
	// that the pushes of thousands of pages linking to a popular one never
	// collide. The push observer folds them.
	PRDeltaFamily = "pr.q"
	// PRPush is weakly notified whenever residual is queued for the URL;
	// its observer folds the queue and pushes if the residual exceeds ε.
	PRPush = framework.Column{Family: "pr", Qualifier: "push"}
	// PRNewFamily marks new links into the URL: qualifier = source, value
	// = whether the source counted the URL as loaded when it added the
	// link. The sources observer tells a source whose guess is wrong.
	PRNewFamily = "pr.new"
	// PRAnnounced is present while the URL's sources have been told that
	// it is loaded: the sources observer compares it with ClusterOf.
	PRAnnounced = framework.Column{Family: "pr", Qualifier: "announced"}
	// PRSources is weakly notified when the URL is loaded or unloaded, or
	// gains a link; its observer tells the sources that must recount.
	PRSources = framework.Column{Family: "pr", Qualifier: "sources"}
	// PRRecount is weakly notified on a source when one of its targets
	// was loaded or unloaded; its observer recounts the source's outlinks.
	PRRecount = framework.Column{Family: "pr", Qualifier: "recount"}
)

// PRState is one URL's PageRank state.
type PRState struct {
	// Rank is the estimate x̂ (settled part); Residual the folded residual
	// r (queued deltas not included).
	Rank, Residual float64
	// Loaded says whether the URL receives the teleport share 1-α: true
	// while the page observer has it indexed.
	Loaded bool
	// Out are the distinct loaded targets (the URL itself excluded) that
	// Rank was last sent along, sorted.
	Out []string
}

const PRStateVersion = 1

func EncodePRState(s *PRState) []byte {
	n := 2 + 16 + binary.MaxVarintLen64
	for _, u := range s.Out {
		n += binary.MaxVarintLen64 + len(u)
	}
	b := make([]byte, 0, n)
	loaded := byte(0)
	if s.Loaded {
		loaded = 1
	}
	b = append(b, PRStateVersion, loaded)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.Rank))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.Residual))
	b = binary.AppendUvarint(b, uint64(len(s.Out)))
	for _, u := range s.Out {
		b = AppendString(b, u)
	}
	return b
}

func DecodePRState(b []byte) (*PRState, error) {
	if len(b) < 2 || b[0] != PRStateVersion || b[1] > 1 {
		return nil, fmt.Errorf("%w: PageRank state has unknown version or flags", ErrCorrupt)
	}
	d := NewDecoder(b[2:])
	s := &PRState{Loaded: b[1] == 1, Rank: math.Float64frombits(d.U64()), Residual: math.Float64frombits(d.U64())}
	s.Out = d.Strings()
	if d.Err() != nil || d.Len() != 0 || !Finite(s.Rank) || !Finite(s.Residual) {
		return nil, fmt.Errorf("%w: PageRank state of %d bytes is truncated, has trailing bytes or is not finite", ErrCorrupt, len(b))
	}
	return s, nil
}

func Finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// ReadPRState reads url's PageRank state; the zero state if it has none.
func ReadPRState(ctx context.Context, tx *framework.Txn, url string) (*PRState, error) {
	b, found, err := tx.Lookup(ctx, PagesTable, []byte(url), PRStateCol)
	if err != nil || !found {
		return &PRState{}, err
	}
	s, err := DecodePRState(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return s, nil
}

// PageRankOf returns the PageRank estimate of url in tx's snapshot: 0 for a
// URL the index never ranked. The estimate is scaled as the package
// documentation says (about 1 for an average page; divide by the sum over
// loaded pages for a probability). It is only maintained by an Index with
// webindex.Options.PageRank set.
func PageRankOf(ctx context.Context, tx *framework.Txn, url string) (float64, error) {
	s, err := ReadPRState(ctx, tx, url)
	if err != nil {
		return 0, err
	}
	return s.Rank, nil
}

// PageRankScale is the factor PageRankRanker multiplies PageRank estimates
// by before rounding them to integer ranks.
const PageRankScale = 1e6
