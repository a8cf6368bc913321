// Package loader seeds the web index: it reads page records (package
// input: directories of HTML files, WARC archives, JSON Lines feeds),
// parses them (package extract) and writes them with a webindex.PageWriter
// (PutCanonical and DeleteCanonical: a record's URL is normalized once,
// when it is read) in batched transactions, several at a time. The
// loader binary (cmd/loader) is a thin shell around it.
//
// # Outcome of every record
//
// Each record ends in exactly one counter of Counts: added (Loaded),
// Replaced, Unchanged (nothing written: re-loading an unchanged corpus costs
// no observer work), Deleted, Superseded (a later record of the same URL in
// the same batch won), Bad (rejected by its source or by the parser: invalid
// URL, too large, not HTML), Failed (its transaction failed) or Abandoned
// (the run was cancelled first). A source that stops early (a truncated
// gzip stream, an unreadable file) counts as an input error; the records it
// yielded before are loaded, and the other sources go on. Records the
// sources skip on purpose (WARC requests and metadata, non-HTML responses,
// symbolic links in a directory) are counted as Skipped, by reason.
//
// Bad records, input errors, failures and skipped symbolic links are reported one by one to
// Options.OnProblem with their source and byte offset or line, and never
// stop the run: a bad record costs only itself, and a batch whose
// transaction fails is retried one record per transaction so that only the
// records that cannot be written fail.
//
// # Order
//
// Records are spread over Options.Concurrency goroutines by URL, so the
// records of one URL are always written by the same goroutine, in input
// order: a deletion after an upsert of the same page deletes it, whatever
// batches they fall in. Two loaders writing the same page at once are
// serialized by the transactions (a conflict re-runs the losing batch on a
// fresh snapshot).
//
// # Notifications
//
// The loader writes pages/page:doc, which the web index's page observer
// watches; the DB the loader writes through must therefore notify it: open
// it with the web index's observers (framework.Options.Observers, or a
// runner.Node's OpenDB), which adds them to the observed columns the
// runners published, so that pages loaded directly into a store on which no
// runner has run yet are indexed as soon as one starts. New refuses a DB
// that would not notify the page observer.
package loader
