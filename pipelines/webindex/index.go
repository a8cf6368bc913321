package webindex

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/pipelines/webindex/api"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// Options configure an Index. The zero value (or nil) is usable.
type Options struct {
	// Ranker chooses canonicals, and its rank of a canonical weighs in
	// its search score. Default: InlinkCount.
	Ranker ranking.Ranker
	// Scoring orders search results. Default: see Scoring's fields.
	Scoring Scoring
	// MaxResults bounds a search's limit and a top list's length, so that
	// no request asks for an unbounded list. Default: 1000.
	MaxResults int
	// MaxConcurrentQueries bounds the requests a Handler serves at once.
	// A query holds its results, and a page's view its whole document, in
	// memory; without a bound a burst of requests grows the process
	// without limit. More than the cores only adds contention: a query
	// is CPU work on the store. Default: 2 × GOMAXPROCS, at least 4.
	MaxConcurrentQueries int
	// MaxQueuedQueries bounds the requests that wait for one of the
	// MaxConcurrentQueries slots, first come first served, as a search
	// engine's search queue does: a burst (a script asking for 16 pages
	// at once) queues and is served, while a request that finds the queue
	// full is answered 503 Service Unavailable at once: the server is
	// overloaded, and queueing more would only grow the wait and the
	// memory of waiting requests (a few KiB each). Default: 256;
	// negative: no queue (a request finding no free slot is refused).
	MaxQueuedQueries int
	// QueueWait is the longest a queued request waits for a slot when its
	// own context (the client's deadline, or its going away) does not end
	// the wait sooner; then the Handler answers 503 with a Retry-After
	// header. Default: 10s.
	QueueWait time.Duration
	// PageRank, if set, makes the index maintain every loaded page's
	// PageRank incrementally (see the package documentation), for
	// PageRankRanker and PageRankOf. It costs several observer
	// transactions per changed page, each writing a cell per outlink, so
	// it is off unless asked for. Turning it on for a store indexed
	// without it ranks only pages loaded or changed since: reload the
	// corpus to rank every page. Default: nil (off).
	PageRank *PageRankOptions
	// Export, if set, is the queue the index exports its canonical table
	// to (CanonicalRow, keyed by URL; a deleted page as a tombstone):
	// Register then adds the export observer (webindex-export, strong on
	// each page's row) and the queue's own. Every runner of a deployment
	// must be configured alike. Turning it on for an index already loaded
	// exports pages as their rows next change: backfill the export
	// observer (ExportObserver) to export them all. Default: nil (off).
	Export *export.Queue
	// RecomputeDelay is how long a cluster's recompute waits after a
	// runner first finds the cluster changed, so that the changes arriving
	// meanwhile are recomputed once (framework.Observer.Delay): a cluster
	// changes with every link to any of its members, and loading pages
	// that link to it changes it many times a second. It is latency added
	// to every change's recompute. Default: 1s; negative: none.
	RecomputeDelay time.Duration
}

// EnsureDefaults fills unset fields and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Ranker == nil {
		o.Ranker = ranking.InlinkCount{}
	}
	if o.MaxResults == 0 {
		o.MaxResults = 1000
	}
	o.Scoring.EnsureDefaults()
	if o.MaxConcurrentQueries == 0 {
		o.MaxConcurrentQueries = max(4, 2*runtime.GOMAXPROCS(0))
	}
	if o.MaxQueuedQueries == 0 {
		o.MaxQueuedQueries = 256
	}
	if o.QueueWait == 0 {
		o.QueueWait = 10 * time.Second
	}
	if o.RecomputeDelay == 0 {
		o.RecomputeDelay = time.Second
	}
	if o.PageRank != nil {
		pr := *o.PageRank
		pr.ensureDefaults()
		o.PageRank = &pr
	}
	return o
}

// Validate reports the first unusable field.
func (o *Options) Validate() error {
	switch {
	case o.MaxResults < 1:
		return fmt.Errorf("%w: MaxResults %d must be positive", ErrInvalidOptions, o.MaxResults)
	case o.MaxConcurrentQueries < 1:
		return fmt.Errorf("%w: MaxConcurrentQueries %d must be positive", ErrInvalidOptions, o.MaxConcurrentQueries)
	case o.QueueWait < 0:
		return fmt.Errorf("%w: QueueWait %v must not be negative", ErrInvalidOptions, o.QueueWait)
	}
	if _, ok := o.Ranker.(ranking.PageRankRanker); ok && o.PageRank == nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, errNoPageRank)
	}
	if o.PageRank != nil {
		if err := o.PageRank.validate(); err != nil {
			return err
		}
	}
	if err := o.Scoring.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}

// ErrInvalidOptions is wrapped by the error New returns for unusable
// Options.
var ErrInvalidOptions = errors.New("webindex: invalid options")

// Index is the web index: its observers (Register) and its queries (Page,
// Search, Top, Handler). The observers and the queries of one deployment
// must use the same Ranker.
type Index struct {
	*query.Engine
	opts  Options
	knobs testingKnobs
}

// testingKnobs switch off parts of the index, so that tests can show what
// those parts are needed for.
type testingKnobs struct {
	// noRetraction skips the negative corrections for removed outlinks.
	noRetraction bool
	// noRows keeps no page's row of the canonical table: what indexing
	// cost before the rows existed, for benchmarks.
	noRows bool
}

// New returns an Index with opts (nil: defaults).
func New(opts *Options) (*Index, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	e := query.New(query.Options{Ranker: o.Ranker, Scoring: o.Scoring, MaxResults: o.MaxResults})
	return &Index{Engine: e, opts: o}, nil
}

// Handler serves the index's JSON API over db (see package api), within
// the limits of the index's Options.
func (ix *Index) Handler(db *framework.DB, log *slog.Logger) http.Handler {
	return api.Handler(ix.Engine, db, log, api.Limits{
		MaxResults:           ix.opts.MaxResults,
		MaxConcurrentQueries: ix.opts.MaxConcurrentQueries,
		MaxQueuedQueries:     ix.opts.MaxQueuedQueries,
		QueueWait:            ix.opts.QueueWait,
	})
}

// Observer names; they are stored in ack columns, so they never change.
const (
	pageObserver    = "webindex-page"
	inlinksObserver = "webindex-inlinks"
	relayObserver   = "webindex-outlinks"
	clusterObserver = "webindex-cluster"
	pushObserver    = "webindex-pagerank-push"
	sourcesObserver = "webindex-pagerank-sources"
	recountObserver = "webindex-pagerank-recount"
)

// Register adds the index's observers to reg, and declares the guards of
// the cells the observers write most (guards):
//
//   - webindex-page (strong, pages/page:doc): diffs the new document
//     against the last indexed one; moves the page between duplicate
//     clusters and writes or deletes its outlinks as inlink cells on the
//     targets' rows, recording the targets for its relay.
//   - webindex-outlinks (weak, pages/page:outlinks-changed): relays the
//     changes of a page's runs to its targets' clusters, in one run per
//     page (see relay.go), and those of targets not loaded to their rows.
//   - webindex-inlinks (weak, pages/page:inlinks-changed): for a URL not
//     loaded, folds its queued inlink count changes (and, in a store
//     written before the relay, forwards the change of a URL's inlinks to
//     its cluster).
//   - webindex-cluster (weak, clusters/cluster:dirty): recomputes a
//     cluster after its members or their inlinks changed.
//
// Recomputing a cluster derives its canonical and inbound count, its
// top-list entry and its search postings from its members' inlinks, and
// each member's row of the canonical table (CanonicalRow).
//
// With Options.Export, the export observer and the queue's:
//
//   - webindex-export (strong, pages/page:row): adds the page's row, or
//     its deletion, to the export queue.
//
// With Options.PageRank, three more keep the PageRank:
//
//   - webindex-pagerank-push (weak, pages/pr:push): folds a URL's queued
//     residual and pushes it along its outlinks once it exceeds ε.
//   - webindex-pagerank-sources (weak, pages/pr:sources): tells the pages
//     linking to a URL to recount their outlinks when it is loaded or
//     unloaded.
//   - webindex-pagerank-recount (weak, pages/pr:recount): recounts a
//     page's outlinks to loaded pages and corrects the residuals.
func (ix *Index) Register(reg *framework.Registry) error {
	obs := []framework.Observer{
		{Name: pageObserver, Table: schema.PagesTable, Columns: []framework.Column{schema.Doc}, Kind: framework.Strong, Fn: ix.observePage},
		{Name: relayObserver, Table: schema.PagesTable, Columns: []framework.Column{outlinksChanged}, Kind: framework.Weak, Fn: ix.observeOutlinks},
		{Name: inlinksObserver, Table: schema.PagesTable, Columns: []framework.Column{schema.TargetDirty}, Kind: framework.Weak, Fn: ix.observeInlinks},
		{Name: clusterObserver, Table: schema.ClustersTable, Columns: []framework.Column{schema.ClusterDirty}, Kind: framework.Weak, Fn: ix.observeCluster},
	}
	if q := ix.opts.Export; q != nil {
		obs = append(obs, framework.Observer{Name: exportObserver, Table: schema.PagesTable, Columns: []framework.Column{schema.RowCol}, Kind: framework.Strong, Fn: ix.observeRow})
		if err := q.Register(reg); err != nil {
			return err
		}
	}
	if ix.opts.PageRank != nil {
		obs = append(obs,
			framework.Observer{Name: pushObserver, Table: schema.PagesTable, Columns: []framework.Column{schema.PRPush}, Kind: framework.Weak, Fn: ix.observePush},
			framework.Observer{Name: sourcesObserver, Table: schema.PagesTable, Columns: []framework.Column{schema.PRSources}, Kind: framework.Weak, Fn: ix.observeSources},
			framework.Observer{Name: recountObserver, Table: schema.PagesTable, Columns: []framework.Column{schema.PRRecount}, Kind: framework.Weak, Fn: ix.observeRecount},
		)
	}
	for _, o := range obs {
		if o.Name == clusterObserver {
			o.Delay = max(0, ix.opts.RecomputeDelay)
		}
		if err := reg.Register(o); err != nil {
			return err
		}
	}
	for _, g := range guards {
		if err := reg.Guard(g); err != nil {
			return err
		}
	}
	return schema.RegisterQueues(reg)
}

// Register adds the observers of an Index with default options to reg. It
// is what a process that only writes pages (the loader) needs, so that its
// writes notify the page observer.
func Register(reg *framework.Registry) error {
	ix, _ := New(nil)
	return ix.Register(reg)
}

// Observers returns a fresh registry holding the index's observers (with
// default options): what a writer that feeds the index, such as the
// loader, names when it opens its DB, so that its pages are notified even
// in a store no runner has served yet.
func Observers() *framework.Registry {
	reg := framework.NewRegistry()
	if err := Register(reg); err != nil {
		panic(err) // the index's own observers are valid
	}
	return reg
}

// Scoring sets how Search orders its matches: the weights of a
// field-aware BM25 (BM25F) over each match's title, anchor text, URL and
// text, of the boosts for a query found whole in its title or anchor text
// or close together, and of a gentle link-based prior. Package scoring
// documents the formula and each weight's default; the zero value stands
// for the defaults, and a negative weight for 0.
type Scoring = scoring.Params
