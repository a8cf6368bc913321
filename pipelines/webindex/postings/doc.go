// Package postings is the layout of the web index's search postings and
// the retrieval that reads the best matches of a query from them without
// reading every match. It decides and encodes; package webindex does the
// reads and writes (its cursors and collector are the I/O at the edges),
// the way etcd's raft leaves the disk and network to its caller.
//
// # Layout
//
// A term's row (terms/<term>) holds, as before, one posting per cluster
// whose text holds the term (BodyFamily: its occurrences) and one per
// cluster whose anchor text does (AnchorFamily: its distinct sources,
// rounded down to a power of two), in cluster order, which conjunctive
// matching and the exact scoring of a cluster read; and the term's
// document frequency (DFColumn), folded from queued changes.
//
// After the row, in key order, come the term's impact rows
// (terms/<term>\x00i<flags><classes>): one entry per cluster holding the
// term in its text, anchor text, canonical's title or URL, whose
// qualifier is the entry's impact, inverted so that a scan lists the
// largest first, then the cluster key. The impact bounds the term's
// blended frequency in the cluster (tf~ in package scoring): each field's
// share computed with the layout's weights and, for the text and anchor
// text, the cluster's lengths and the largest mean length of a class
// (ClassOf) holding the corpus's mean when the entry was written. Its
// value holds the cluster's postings under the term. Entries of one
// combination of fields, mean-length classes and prior class
// (PriorClassOf) share a row (a Run), so a search knows which fields the
// entries it has not read yet can hold, how high their prior can be, and
// by how much each row's impacts must be scaled for the corpus it
// searches (Bounds): by the weights the search uses over the layout's,
// and by the mean length over the one the row assumed when the corpus's
// has grown past it. The bounds are safe whatever the weights and the
// corpus; they are tight with the default weights and a corpus whose mean
// lengths stayed in the classes the entries were written in.
//
// What an entry depends on must be kept a bound by whoever writes it (a
// cluster's recompute, in the transaction that writes the postings): the text's occurrences and length never change for a
// cluster (its key hashes its text); an anchor count that changes
// rewrites its entry, and the anchor field length the entries were
// computed with (Shape.AnchorLen) stays until the field becomes shorter,
// which rewrites them all (a longer field only lowers the anchor share);
// its canonical's title and URL are reposted when the canonical changes
// or its title does; the prior class is raised, moving every entry, when
// the rank rises past it, and kept when it falls, so that a rank that
// changes with every inlink moves entries a few times in its life, not
// each time.
//
// # Retrieval
//
// Plan.Run is the combined algorithm of Fagin, Lotem and Naor over the
// impact rows of the query's terms: it reads entries from the row whose
// next one bounds the most of the score, keeps the clusters it meets as
// candidates bounded by what their entries say and by the rows not read
// yet, has the best candidates scored exactly by a Collector (which
// reads their postings, state and summary as an exhaustive search does),
// and stops when the highest score a cluster not met could have, and the
// best bound of a candidate not scored, are below the last of the best
// kept — or when some word of the query has no row left holding it in
// text or anchors (every match has been met). The bounds are taken case
// by case (title holding every word or not, anchor text likewise, each
// prior class), because the multipliers of the score apply to a cluster
// as a whole. The results are then exactly those of ranking every match,
// in the same order, ties included: a cluster that could tie the last
// kept is scored.
//
// # Status
//
// Package webindex does not write or read this layout yet. Wired in, with
// its document frequencies kept by a queue, it made search 7–16× faster
// at the median (96 ms against 1.5 s over 100,000 pages; relevance on the
// judged sets unchanged) but doubled the cells a cluster's recompute
// writes: 1.7× the CPU of indexing a page on pebble, 38 against 28–34
// TiKV requests per page, twice the cost of a 1 % change. The write path
// has to absorb that before the layout is used; the layout, its bounds
// and the retrieval are tested here against ranking every match.
package postings
