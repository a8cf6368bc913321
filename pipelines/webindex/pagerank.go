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
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

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

// queueResidual sends delta of residual from source to target: a queued
// cell of target's row and a weak notification of its push observer.
func queueResidual(tx *framework.Txn, target, source string, delta float64) error {
	col := framework.Column{Family: schema.PRDeltaFamily, Qualifier: fmt.Sprintf("%016x/%s", tx.StartTs(), source)}
	if err := tx.Set(schema.PagesTable, []byte(target), col, binary.BigEndian.AppendUint64(nil, math.Float64bits(delta))); err != nil {
		return err
	}
	return tx.NotifyWeak(schema.PagesTable, []byte(target), schema.PRPush)
}

// queuedResidual sums url's queued residual deltas and returns their cells.
func queuedResidual(ctx context.Context, tx *framework.Txn, url string) (float64, []framework.Column, error) {
	var sum float64
	var cells []framework.Column
	for e, err := range tx.Scan(ctx, schema.RowScan(schema.PagesTable, url, schema.PRDeltaFamily)) {
		if err != nil {
			return 0, nil, err
		}
		if len(e.Value) != 8 || !schema.Finite(math.Float64frombits(binary.BigEndian.Uint64(e.Value))) {
			return 0, nil, fmt.Errorf("%w: PageRank residual delta %s of %s: %x", schema.ErrCorrupt, e.Column.Qualifier, url, e.Value)
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
// of ε the queue is left alone until FoldAt deltas have piled up, so that a
// popular page's residual is one value to read, not thousands of cells.
func (ix *Index) observePush(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	url := string(row)
	s, err := schema.ReadPRState(ctx, tx, url)
	if err != nil {
		return err
	}
	queued, cells, err := queuedResidual(ctx, tx, url)
	if err != nil {
		return err
	}
	r := s.Residual + queued
	push := math.Abs(r) > ix.opts.PageRank.Tolerance
	if !push && len(cells) < schema.FoldAt {
		return nil
	}
	for _, c := range cells {
		if err := tx.Delete(schema.PagesTable, row, c); err != nil {
			return err
		}
	}
	s.Residual = r
	if push {
		s.Rank += r
		s.Residual = 0
		if len(s.Out) > 0 {
			share := ranking.Damping * r / float64(len(s.Out))
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
	return tx.Set(schema.PagesTable, row, schema.PRStateCol, schema.EncodePRState(s))
}

// rankChanged tells url's cluster that a member's rank changed, when
// canonicals are chosen by PageRank.
func (ix *Index) rankChanged(ctx context.Context, tx *framework.Txn, row []byte) error {
	if _, ok := ix.opts.Ranker.(ranking.PageRankRanker); !ok {
		return nil
	}
	key, found, err := tx.Lookup(ctx, schema.PagesTable, row, schema.ClusterOf)
	if err != nil || !found {
		return err
	}
	return tx.NotifyWeak(schema.ClustersTable, key, schema.ClusterDirty)
}

// rebase changes what url's rank is sent along (out, its distinct loaded
// targets) and whether it receives the teleport share (loaded), and sends
// the corrections that keep the residuals exact: each target of the old
// outlinks is taken back the share α·rank/|old| it was sent, each target
// of the new ones is sent α·rank/|new|, and url's own residual gains or
// loses 1-α as it is loaded or unloaded.
func (ix *Index) rebase(ctx context.Context, tx *framework.Txn, url string, out []string, loaded bool) error {
	s, err := schema.ReadPRState(ctx, tx, url)
	if err != nil {
		return err
	}
	if len(out) > schema.MaxPROutlinks {
		out = out[:schema.MaxPROutlinks]
	}
	if s.Loaded == loaded && slices.Equal(s.Out, out) {
		return nil
	}
	deltas := map[string]float64{}
	if s.Rank != 0 {
		if len(s.Out) > 0 {
			take := ranking.Damping * s.Rank / float64(len(s.Out))
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
			give := ranking.Damping * s.Rank / float64(len(out))
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
		s.Residual += 1 - ranking.Damping
	case !loaded && s.Loaded:
		s.Residual -= 1 - ranking.Damping
	}
	s.Loaded, s.Out = loaded, out
	if err := tx.Set(schema.PagesTable, []byte(url), schema.PRStateCol, schema.EncodePRState(s)); err != nil {
		return err
	}
	return tx.NotifyWeak(schema.PagesTable, []byte(url), schema.PRPush)
}

// errNoPageRank is wrapped by the error New returns for a PageRankRanker
// without Options.PageRank: it would rank every page 0.
var errNoPageRank = errors.New("PageRankRanker needs Options.PageRank")
