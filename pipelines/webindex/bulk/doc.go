// Package bulk owns the computation of a first load: Compute passes every
// cell the observers would have left once all pages were indexed (inlink
// counts folded, nothing queued, and with PageRank every page's state
// settled) to a SetFunc, table by table in key order, within a memory
// budget whatever the corpus's size, by sorting what the pages say
// externally (internal/extsort).
//
// It imports schema, whose encoders make the cells the observers would,
// and ranking, which chooses the canonicals as the cluster observer does.
// It writes nothing itself: the web index's BulkLoad runs the protocol
// (the fence, the import, the pages written meanwhile) around it.
package bulk
