// Package schema owns the web index's stored layout: its tables, row
// keys, columns and families, the encoding of every value the index
// stores, and the readers and writers of cells that more than one part of
// the index uses (a page's document and summary, a cluster's state and
// members, a URL's inlinks and their count folded with its queued
// changes, the corpus statistics, the top and site list entries, the
// PageRank state and a page's row of the canonical table).
//
// It is the leaf of the web index's packages: it imports the framework
// (cells, transactions, the combine queue the corpus statistics are folded
// by), extract (the documents it encodes) and scoring (the excerpt a
// snippet is made from), and nothing of the index above it, so that the
// observers, the queries and the bulk load read and write one layout.
// Nothing here may change what is stored: the encodings carry versions,
// and older versions still decode.
//
// # Tables
//
//	pages/<url>     page:doc               the loaded document (loader writes; strong observer)
//	                page:summary           title (cut to MaxTitleBytes) and text length, written with page:doc
//	                page:excerpt           the text's first ExcerptBytes, for snippets, written with page:doc
//	                page:indexed           the document as last indexed (diffed on the next run)
//	                page:cluster           the key of the cluster the page is a member of
//	                in:<source url>        anchor texts of source's links to url (one: its text;
//	                                       several: 0xff, count, texts)
//	                page:inlinks           number of inlinks, folded from queued deltas (in.q:*)
//	                page:anchor-terms      for each anchor term, the sources whose anchors to url hold it,
//	                                       folded with page:inlinks from the same queued deltas
//	                in.q:<ts>/<source>     a queued change of the two: count ±1 or 0, each term ±1
//	                page:inlinks-changed   weak notification: fold the queued deltas of a url not loaded
//	                page:relay             the targets whose inlinks url's page observer changed, until relayed
//	                page:outlinks-changed  weak notification: relay them to the targets' clusters
//	                page:row               the page's row of the canonical table (CanonicalRow: title,
//	                                       canonical, inbound count, rank), exported with Options.Export
//	clusters/<key>  member:<url>           the cluster's pages (key = sha256 of the text, or url:<url>)
//	                cluster:state          canonical, inbound count, canonical's rank, words of the text,
//	                                       length of the anchor field
//	                cluster:terms          the terms posted for the cluster
//	                cluster:anchors        the anchor terms posted for the cluster, each with its sources
//	                cluster:dirty          weak notification: recompute the state
//	terms/<term>    cluster:<key>          clusters whose text contains term; value: occurrences
//	                anchor:<key>           clusters whose anchor text contains term; value: distinct
//	                                       sources outside the cluster whose anchors hold it,
//	                                       rounded down to a power of two
//	top/<rank key>  top:entry              one row per cluster, ordered by inbound count, URL
//	sites/<host>\0<rank key>  top:entry    the same, per host of the canonical
//	stats/corpus    stat:corpus            pages, links, clusters, clusters with text, words, the links'
//	                                       distinct anchor terms, last change;
//	                                       folded from queued deltas (webindex-corpus.q:* of the rows
//	                                       stats/corpus\0<second>, one per second of their writers,
//	                                       each second's folded into a partial webindex-corpus.q:p/<ts>)
//	bulkload/fence  fence:state            a bulk load's fence: phase, import timestamps (only while one runs)
//	                pending:<url>          a page written while the fence was up, to index after the import
//
// With Options.PageRank, pages/<url> rows also hold:
//
//	pr:state        rank estimate, folded residual, loaded flag, outlinks the rank was sent along
//	pr.q:<ts>/<src> residual queued for the URL by src (folded by the push observer)
//	pr:push         weak notification: fold the residual, push it if it exceeds ε
//	pr.new:<src>    a new link from src, and whether src counted the URL as loaded
//	pr:announced    present while the URL's sources were last told it is loaded
//	pr:sources      weak notification: tell sources whose count of the URL may be wrong
//	pr:recount      weak notification: recount the page's outlinks to loaded pages
package schema
