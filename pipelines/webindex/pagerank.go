package webindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/trickle-dev/trickle/framework"
)

// PageRank is maintained by local pushes (Gauss–Southwell iteration) when
// Options.PageRank is set; see the package documentation, section PageRank,
// for the definition and the error bound.

// Damping is the PageRank damping factor α: the probability that the
// random surfer follows a link rather than jumping to a random page.
const Damping = 0.85

// PageRankOptions configure the PageRank the index maintains.
type PageRankOptions struct {
	// Tolerance is ε: a page pushes its residual to its outlinks as soon
	// as the residual's magnitude exceeds ε, so when nothing is pending
	// every residual is at most ε and every page's rank is within a factor
	// ε/(1-Damping) of its exact value (see the package documentation).
	// Smaller is more exact and costs more pushes: the number of pushes a
	// change causes grows roughly with log(1/ε). It must be in (0, 1).
	// Default: 1e-3 (ranks within 0.67%).
	Tolerance float64
}

// defaultTolerance is PageRankOptions.Tolerance's default.
const defaultTolerance = 1e-3

// prMaxOutlinks bounds the outlinks that carry rank: a page with more
// pushes through only the first prMaxOutlinks of its loaded targets (in
// URL order), so that a push, which writes one cell per target and is
// repeated for every residual above the tolerance, stays bounded however
// large a generated sitemap is.
const prMaxOutlinks = 10_000

func (o *PageRankOptions) ensureDefaults() {
	if o.Tolerance == 0 {
		o.Tolerance = defaultTolerance
	}
}

func (o *PageRankOptions) validate() error {
	if !(o.Tolerance > 0 && o.Tolerance < 1) { // also rejects NaN
		return fmt.Errorf("%w: PageRank.Tolerance %v must be in (0, 1)", ErrInvalidOptions, o.Tolerance)
	}
	return nil
}

// Cells of the PageRank, all on PagesTable rows.
var (
	// prStateCol holds a URL's PageRank state (an encoded prState): its
	// rank estimate, its folded residual, whether it receives the
	// teleport share, and the outlinks its rank was last sent along. All
	// four change together: the corrections a change of outlinks sends
	// depend on the rank, so a push and a change of outlinks must not both
	// commit from one snapshot.
	prStateCol = framework.Column{Family: "pr", Qualifier: "state"}
	// prDeltaFamily queues residual sent to a URL, one cell per sending
	// transaction and source (qualifier: start timestamp and source), so
	// that the pushes of thousands of pages linking to a popular one never
	// collide. The push observer folds them.
	prDeltaFamily = "pr.q"
	// prPush is weakly notified whenever residual is queued for the URL;
	// its observer folds the queue and pushes if the residual exceeds ε.
	prPush = framework.Column{Family: "pr", Qualifier: "push"}
	// prNewFamily marks new links into the URL: qualifier = source, value
	// = whether the source counted the URL as loaded when it added the
	// link. The sources observer tells a source whose guess is wrong.
	prNewFamily = "pr.new"
	// prAnnounced is present while the URL's sources have been told that
	// it is loaded: the sources observer compares it with clusterOf.
	prAnnounced = framework.Column{Family: "pr", Qualifier: "announced"}
	// prSources is weakly notified when the URL is loaded or unloaded, or
	// gains a link; its observer tells the sources that must recount.
	prSources = framework.Column{Family: "pr", Qualifier: "sources"}
	// prRecount is weakly notified on a source when one of its targets
	// was loaded or unloaded; its observer recounts the source's outlinks.
	prRecount = framework.Column{Family: "pr", Qualifier: "recount"}
)

// prState is one URL's PageRank state.
type prState struct {
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

const prStateVersion = 1

func encodePRState(s *prState) []byte {
	n := 2 + 16 + binary.MaxVarintLen64
	for _, u := range s.Out {
		n += binary.MaxVarintLen64 + len(u)
	}
	b := make([]byte, 0, n)
	loaded := byte(0)
	if s.Loaded {
		loaded = 1
	}
	b = append(b, prStateVersion, loaded)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.Rank))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.Residual))
	b = binary.AppendUvarint(b, uint64(len(s.Out)))
	for _, u := range s.Out {
		b = appendString(b, u)
	}
	return b
}

func decodePRState(b []byte) (*prState, error) {
	if len(b) < 2 || b[0] != prStateVersion || b[1] > 1 {
		return nil, fmt.Errorf("%w: PageRank state has unknown version or flags", ErrCorrupt)
	}
	d := newDecoder(b[2:])
	s := &prState{Loaded: b[1] == 1, Rank: math.Float64frombits(d.U64()), Residual: math.Float64frombits(d.U64())}
	s.Out = d.strings()
	if d.Err() != nil || d.Len() != 0 || !finite(s.Rank) || !finite(s.Residual) {
		return nil, fmt.Errorf("%w: PageRank state of %d bytes is truncated, has trailing bytes or is not finite", ErrCorrupt, len(b))
	}
	return s, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// readPRState reads url's PageRank state; the zero state if it has none.
func readPRState(ctx context.Context, tx *framework.Txn, url string) (*prState, error) {
	b, found, err := tx.Lookup(ctx, PagesTable, []byte(url), prStateCol)
	if err != nil || !found {
		return &prState{}, err
	}
	s, err := decodePRState(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return s, nil
}

// queueResidual sends delta of residual from source to target: a queued
// cell of target's row and a weak notification of its push observer.
func queueResidual(tx *framework.Txn, target, source string, delta float64) error {
	col := framework.Column{Family: prDeltaFamily, Qualifier: fmt.Sprintf("%016x/%s", tx.StartTs(), source)}
	if err := tx.Set(PagesTable, []byte(target), col, binary.BigEndian.AppendUint64(nil, math.Float64bits(delta))); err != nil {
		return err
	}
	return tx.NotifyWeak(PagesTable, []byte(target), prPush)
}

// queuedResidual sums url's queued residual deltas and returns their cells.
func queuedResidual(ctx context.Context, tx *framework.Txn, url string) (float64, []framework.Column, error) {
	var sum float64
	var cells []framework.Column
	for e, err := range tx.Scan(ctx, rowScan(PagesTable, url, prDeltaFamily)) {
		if err != nil {
			return 0, nil, err
		}
		if len(e.Value) != 8 || !finite(math.Float64frombits(binary.BigEndian.Uint64(e.Value))) {
			return 0, nil, fmt.Errorf("%w: PageRank residual delta %s of %s: %x", ErrCorrupt, e.Column.Qualifier, url, e.Value)
		}
		sum += math.Float64frombits(binary.BigEndian.Uint64(e.Value))
		cells = append(cells, e.Column)
	}
	return sum, cells, nil
}

// observePush folds a URL's queued residual and, if its magnitude exceeds
// ε, pushes it: the rank takes the residual, and each outlink's target is
// sent the share α·residual/outlinks (a page without loaded outlinks keeps
// it all: its mass teleports, which the normalization accounts for). Short
// of ε the queue is left alone until foldAt deltas have piled up, so that a
// popular page's residual is one value to read, not thousands of cells.
func (ix *Index) observePush(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	url := string(row)
	s, err := readPRState(ctx, tx, url)
	if err != nil {
		return err
	}
	queued, cells, err := queuedResidual(ctx, tx, url)
	if err != nil {
		return err
	}
	r := s.Residual + queued
	push := math.Abs(r) > ix.opts.PageRank.Tolerance
	if !push && len(cells) < foldAt {
		return nil
	}
	for _, c := range cells {
		if err := tx.Delete(PagesTable, row, c); err != nil {
			return err
		}
	}
	s.Residual = r
	if push {
		s.Rank += r
		s.Residual = 0
		if len(s.Out) > 0 {
			share := Damping * r / float64(len(s.Out))
			for _, t := range s.Out {
				if err := queueResidual(tx, t, url, share); err != nil {
					return err
				}
			}
		}
		if err := ix.rankChanged(ctx, tx, row); err != nil {
			return err
		}
	}
	return tx.Set(PagesTable, row, prStateCol, encodePRState(s))
}

// rankChanged tells url's cluster that a member's rank changed, when
// canonicals are chosen by PageRank.
func (ix *Index) rankChanged(ctx context.Context, tx *framework.Txn, row []byte) error {
	if _, ok := ix.opts.Ranker.(PageRankRanker); !ok {
		return nil
	}
	key, found, err := tx.Lookup(ctx, PagesTable, row, clusterOf)
	if err != nil || !found {
		return err
	}
	return tx.NotifyWeak(ClustersTable, key, clusterDirty)
}

// rebase changes what url's rank is sent along (out, its distinct loaded
// targets) and whether it receives the teleport share (loaded), and sends
// the corrections that keep the residuals exact: each target of the old
// outlinks is taken back the share α·rank/|old| it was sent, each target
// of the new ones is sent α·rank/|new|, and url's own residual gains or
// loses 1-α as it is loaded or unloaded.
func (ix *Index) rebase(ctx context.Context, tx *framework.Txn, url string, out []string, loaded bool) error {
	s, err := readPRState(ctx, tx, url)
	if err != nil {
		return err
	}
	if len(out) > prMaxOutlinks {
		out = out[:prMaxOutlinks]
	}
	if s.Loaded == loaded && slices.Equal(s.Out, out) {
		return nil
	}
	deltas := map[string]float64{}
	if s.Rank != 0 {
		if len(s.Out) > 0 {
			take := Damping * s.Rank / float64(len(s.Out))
			for _, t := range s.Out {
				if ix.knobs.noRetraction {
					if _, kept := slices.BinarySearch(out, t); !kept {
						continue
					}
				}
				deltas[t] -= take
			}
		}
		if len(out) > 0 {
			give := Damping * s.Rank / float64(len(out))
			for _, t := range out {
				deltas[t] += give
			}
		}
	}
	for _, t := range slices.Sorted(maps.Keys(deltas)) {
		if d := deltas[t]; d != 0 {
			if err := queueResidual(tx, t, url, d); err != nil {
				return err
			}
		}
	}
	switch {
	case loaded && !s.Loaded:
		s.Residual += 1 - Damping
	case !loaded && s.Loaded:
		s.Residual -= 1 - Damping
	}
	s.Loaded, s.Out = loaded, out
	if err := tx.Set(PagesTable, []byte(url), prStateCol, encodePRState(s)); err != nil {
		return err
	}
	return tx.NotifyWeak(PagesTable, []byte(url), prPush)
}

// PageRankOf returns the PageRank estimate of url in tx's snapshot: 0 for a
// URL the index never ranked. The estimate is scaled as the package
// documentation says (about 1 for an average page; divide by the sum over
// loaded pages for a probability). It is only maintained by an Index with
// Options.PageRank set.
func PageRankOf(ctx context.Context, tx *framework.Txn, url string) (float64, error) {
	s, err := readPRState(ctx, tx, url)
	if err != nil {
		return 0, err
	}
	return s.Rank, nil
}

// PageRankScale is the factor PageRankRanker multiplies PageRank estimates
// by before rounding them to integer ranks.
const PageRankScale = 1e6

// PageRankRanker ranks a page by the PageRank the index maintains (Options
// .PageRank must be set): round(PageRankOf × PageRankScale). Ranks of pages
// whose PageRanks are closer than the error bound may come out in either
// order. An Index using it recomputes a page's cluster whenever the page's
// rank estimate changes, so that canonicals follow the ranks.
type PageRankRanker struct{}

// Rank implements Ranker.
func (PageRankRanker) Rank(ctx context.Context, tx *framework.Txn, url string, _ int64) (int64, error) {
	r, err := PageRankOf(ctx, tx, url)
	if err != nil {
		return 0, err
	}
	return int64(math.Round(r * PageRankScale)), nil
}

// errNoPageRank is wrapped by the error New returns for a PageRankRanker
// without Options.PageRank: it would rank every page 0.
var errNoPageRank = errors.New("PageRankRanker needs Options.PageRank")
