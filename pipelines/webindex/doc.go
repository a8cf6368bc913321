// Package webindex keeps a web index up to date one page at a time: the
// application Percolator was built for. Pages are loaded (PutPage,
// DeletePage — usually by cmd/loader), and observers keep duplicate
// clusters, canonical URLs, inverted links with anchor text, inbound counts,
// a top list and a search index exact without recomputing the corpus.
//
// # Semantics
//
// Parsing and URL normalization are package extract's. Pages with identical
// non-empty text form a duplicate cluster; a page without text is alone in
// its own. The rank of a URL is the number of distinct loaded pages linking
// to it (a Ranker can replace this, e.g. PageRankRanker with the PageRank below). A cluster's
// canonical has the highest rank; ties go to the shortest URL, then the
// smallest. The inlinks of a canonical are every link whose target is in
// its cluster and whose source is not; its inbound count is the number of
// their distinct sources. Search returns canonicals with text holding
// every word of the query (extract.ParseQuery) in their text or in the
// anchor text of their inlinks, by a field-aware BM25 over their title,
// anchor text, URL and text with boosts for the query found whole or close
// together and a capped link-based prior (package scoring), then by inbound
// count, then URL; Top lists canonicals by inbound count,
// then URL, and SitePage those of one host the same way. Every list pages
// by offset and limit.
//
// # Packages
//
// The index is cut by concern; each package imports only those listed
// before it, so none reaches back up:
//
//   - schema: the tables, row keys, columns and families, and the
//     encodings of every stored value (see its documentation for the
//     layout), with the readers and writers of cells that several packages
//     share. It imports only the framework and extract.
//   - ranking: what represents a duplicate cluster: the Ranker, the order
//     that picks the canonical, and a cluster's view computed from one
//     snapshot.
//   - query: what answers: pages, searches, top and site lists, links,
//     snippets, reads as of a past time, and the check against package
//     batch (Engine, which Index embeds).
//   - api: the JSON API over an Engine (Index.Handler).
//   - bulk: the computation of a first load's cells within a memory
//     budget (BulkLoad imports them).
//   - webindex (this package): the front door: Options, New and Register,
//     the observers that keep the index, page writes (PutPage, PageWriter),
//     the bulk load's protocol and its fence, the export of the canonical
//     table, and the guards.
//
// # Why it is shaped this way
//
// Every cell a page's observer writes is keyed by that page (its inlink
// cell and a queued +1/-1 for the target's inlink count on each target's
// row, its member cell in its cluster), so pages are indexed concurrently
// without transaction conflicts however popular their targets are — the
// pattern of Fluo's CombineQueue: the count of a popular page is folded
// from its queued changes by a weak observer, and read as count plus queued
// changes, never by scanning its thousands of inlinks. What depends on
// several pages — a cluster's canonical and inbound count — is recomputed
// by a weak observer; weak notifications collapse, so a burst of new links
// to a popular page costs one recomputation. For a cluster of one page
// (nearly all of them) the inbound count is the page's inlink count; only
// a cluster with duplicates reads its members' inlinks, to count distinct
// sources from outside it.
//
// # PageRank
//
// With Options.PageRank set, the index keeps the PageRank of every loaded
// page, with damping α = Damping = 0.85, over the graph whose nodes are the
// loaded pages and whose edges are each page's links to distinct loaded
// pages other than itself (repeated links count once, self-links and links
// to URLs that are not loaded not at all; a page with more than 10,000
// links to loaded pages sends its rank along the first 10,000 by URL). A page without such links is
// dangling: its mass teleports uniformly to all loaded pages, as in the
// original formulation. The index stores the solution x of
//
//	x = (1-α)·1 + α·Hᵀx,   H[u][v] = 1/|out(u)| for v in out(u)
//
// with H substochastic (dangling rows zero). The PageRank as a probability
// distribution over the N loaded pages (summing to 1, dangling mass sent
// uniformly) is exactly x/Σx, because the uniform dangling and teleport
// terms only rescale the solution; x itself averages 1 over the pages of a
// graph without dangling pages and is at least 1-α for every loaded page.
//
// x is approached by local pushes: each URL u has an estimate x̂[u] and a
// residual r[u], kept so that, exactly,
//
//	r = (1-α)·1_loaded + α·Hᵀx̂ - x̂,   hence   x - x̂ = (I - αHᵀ)⁻¹ r
//
// A push moves r[u] into x̂[u] and sends α·r[u]/|out(u)| to each outlink.
// When a page is loaded, deleted or its outlinks change (its own links, or
// a target loaded or deleted), its residual gains or loses 1-α and its
// targets are sent α·x̂[u]/|new out(u)| and sent back α·x̂[u]/|old out(u)|,
// which keeps the identity above. A URL pushes while |r[u]| > ε
// (PageRankOptions.Tolerance), so once no notification is pending every
// |r[u]| ≤ ε, and since the entries of (I - αHᵀ)⁻¹ are non-negative and
// each row sums to x[v]/(1-α),
//
//	|x̂[v] - x[v]| ≤ ε/(1-α) · x[v]   for every loaded page v,
//
// and the normalized estimate x̂[v]/Σx̂ is within 2δ/(1-δ) of x[v]/Σx,
// relatively, with δ = ε/(1-α). A deleted page keeps its state with no
// teleport share and no outlinks; its estimate returns to 0 as the pages
// linking to it stop counting it. A bulk load imports every page's state
// settled (a Jacobi iteration run far inside ε, stored with its exact
// residual), so changes after it are corrected as after page-by-page loads.
//
// Residual sent to a page is written as its own cell (pr.q), never added to
// a shared one, so hundreds of pages pushing into a popular page at once do
// not collide; the popular page's push observer, notified weakly, folds
// them all in one run. Which outlinks count depends on whether the targets
// are loaded, which the source reads in its own transaction; a concurrent
// load of a target is caught by the target's sources observer (see
// pagerank_links.go), which runs after both and makes the source recount.
//
// Search postings are keyed by cluster, not by URL: all members of a
// cluster share their text, so when the canonical changes no posting moves.
// What BM25 needs of the whole corpus (the number and length of texts)
// would be the hottest cell of all, updated by every cluster; it is folded
// from queued changes by a weak observer (framework/combine), like the
// inlink counts. A term's document frequency is kept nowhere: it is the
// number of postings in the term's row, counted by a search before it
// scores (folded counts cost a queued cell per term and cluster and
// doubled the cost of indexing a page). The title a match is scored
// on is its canonical's result title, read from its summary when it is
// scored, so a new canonical moves no posting either. A store written
// before scoring existed has postings without frequencies (read as one
// occurrence) and no statistics; a cluster is reposted, and counted, the
// next time it changes, and its pages are counted once loaded again.
//
// The anchor field of a cluster counts, for each term, the distinct pages
// outside it whose anchors to any member hold the term: so one page's
// navigation bar counts once, however many links it has, and a page's
// own links never describe it. Every link's change (added, removed,
// re-anchored) is queued on its target's row in the same cell as the
// inlink count's change, with each of its anchor terms ±1, and folded
// with the count; the target's cluster recompute, which runs anyway when
// its inlinks change, reads the folded counts plus the queued ones and
// moves the cluster's anchor postings to match (diffing them against
// cluster:anchors). A posting holds its count rounded down to a power of
// two, which is what search scores with: a popular page's postings are
// written again when its sources for a term double, not with every link. So hundreds of pages linking to a popular page at once
// write hundreds of distinct cells, and one recompute folds them. A
// cluster with duplicates counts its members' inlink cells instead, as
// it does for its inbound count; when a canonical changes, nothing moves,
// since postings are keyed by cluster. The mean anchor length BM25F
// normalizes by is taken from the anchors of every page's own links,
// queued with the page's corpus change, so that no recompute touches the
// corpus statistics. A store indexed before anchor statistics existed has
// queued inlink changes without terms: its clusters get anchor postings
// as they are recomputed, and a reload (or a bulk load into a fresh
// store) gives every page its anchor statistics.
//
// Queries that list pages (Search, Top) read only small cells: the posting
// and state of each match, and each result's summary. A document can be
// many megabytes and a cluster's term list as long as its vocabulary, so
// neither is read to list a page; only a page's own view (Page) reads its
// document. Stores written before page:summary and cluster:terms existed
// still answer: a missing summary is derived from the document (PutPage
// writes it on the next load, even of an unchanged page), and a cluster
// state holding its terms moves them to cluster:terms when it next changes.
//
// # Export
//
// The canonical table — every loaded page with its title, its cluster's
// canonical and inbound count and its own rank — is what systems outside
// the store ask of the index. The cluster observer writes each member's
// row (page:row) when its recompute changes it, before it decides whether
// the cluster's state changed (a member's rank may change alone); the
// page observer keeps the row's title current when only the title
// changed, and deletes the row with the page. With Options.Export, a
// strong observer of page:row adds the row (as JSON), or a tombstone, to
// the export queue whenever it changes, as its snapshot holds it: the
// observer's runs for one URL all write the URL's ack cell, so two of them
// conflict and the one that commits later started later, with the higher
// sequence number and the newer row, as the queue's consumers need. The
// rows are kept whether or not the index is exported, so that export can
// be turned on for a loaded index and backfilled (ExportObserver).
//
// # Bulk loading
//
// Loading a corpus page by page runs every observer transaction; BulkLoad
// (and BulkLoadSorted, which takes the pages as a stream in URL order)
// instead computes every cell the observers would have left once all
// pages were indexed (inlink counts folded, nothing queued), within
// BulkOptions.MemoryBytes whatever the corpus's size: what the pages say
// is sorted externally (internal/extsort) by link target, by cluster and
// by term, and each table is passed in key order from merges of sorted
// runs. It writes the cells with framework.DB.Import as the committed
// versions of one
// transaction at start and commit timestamps S < C drawn from the oracle,
// with no notification. The page observer keys its work on page:indexed,
// which is imported with the rest, so a later change of a page is diffed
// against the imported state as if the observer had indexed it. The index
// must be empty; pages others write meanwhile go through a fence:
//
//  1. S and C are drawn; then one transaction checks that the index is
//     empty and puts the fence up (fence:state, phase "importing", S, C).
//     Every transaction that sees it started after it committed, so
//     after C: the imported versions are older than anything it writes.
//     A second transaction makes the fence active for page writes whose
//     snapshot is a quarter second of timestamps after its own, and the
//     load waits for the oracle to pass that, so that a PageWriter, which
//     reads the fence once per quarter second of snapshot time, acts
//     exactly as a write that reads it every time (see PageWriter).
//  2. While the fence is up and importing, PutPage and DeletePage (whose
//     snapshot is at or after the fence's active timestamp) write
//     nothing the observers see: they record the change under the fence
//     (pending:<url>) and rewrite fence:state in the same transaction.
//     Those rewrites make them conflict with the transaction that closes
//     the fence (and with each other), so no such write commits unseen.
//  3. The import checks, before its first write, that the index's tables
//     hold no cell at all: a transaction that started before the fence
//     was active and wrote a page since makes the load give up (ErrNotEmpty: the
//     import's cells are removed and the fence closed, so that page is
//     indexed as usual). One that commits later still is left alone by
//     the page observer, which, while the import runs, records the page
//     under the fence instead of indexing it.
//  4. Once the import is written, one transaction sets the fence
//     "closing": from then on pages are written as usual (a page recorded
//     under the fence is first moved, in the same transaction). Batches
//     of transactions then write each recorded page to page:doc, which
//     notifies the page observer, and the last one removes the fence.
//
// So each page written during the load is indexed once, against the
// imported state, after the import: not lost, not counted twice. The
// import itself bypasses transactions: a reader whose snapshot is at or
// after C, taken while the import is being written, may see the index
// appear part by part (it was empty and fenced before).
//
// A bulk load that stops half way (its process dies, its store stops
// answering) leaves the fence up and part of the import written; pages
// loaded meanwhile wait under the fence. Running it again with
// BulkOptions.Resume (loader -bulk -bulk-resume) removes what the import
// wrote and writes it again at the same timestamps, or, if the import was
// complete, just closes the fence; AbortBulkLoad removes the import and
// closes the fence, leaving the pages loaded meanwhile to be indexed as
// usual.
package webindex
