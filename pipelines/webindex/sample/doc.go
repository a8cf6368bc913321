// Package sample generates deterministic synthetic web corpora for testing,
// benchmarking and demonstrating the web index.
//
// Real crawls are large, licensed and not reproducible; hand-written pages
// are too few and too regular to exercise what the index is about. A
// generated corpus is the same bytes for the same seed, any size, and has
// the structure that makes incremental indexing hard:
//   - a few hub pages (sites' home and section pages, and Zipf-popular
//     pages) that a large share of all pages link to, and a long tail that
//     almost nobody links to;
//   - 10 to 30 outlinks per page, spelled absolute, root-relative, relative,
//     with fragments, or with an uppercase host and the default port, so
//     that only normalization makes them agree; self links; image-only
//     links with no anchor text; varied anchor text; dangling links to
//     pages that never exist, and to "new" pages that a later Step adds;
//   - exact duplicates (about 5%: mirror sites, index.html aliases of
//     directory pages) and near-duplicates (about 2%: one word differs);
//   - text drawn from a fixed vocabulary (Word) with Zipf frequencies, so
//     that common and rare words both make useful queries; script and style
//     elements whose words (ScriptWord, StyleWord) must never be indexed;
//     a few entities and a non-ASCII word; about 1% redirect stubs without
//     any text.
//
// Corpus.Step then changes the corpus the way a recrawl would — edits,
// deletes, re-adds, new pages, pages joining and leaving duplicate clusters,
// and links moving so that canonicals change — returning the Changes a
// loader applies. The reference answers for any state of a corpus are
// batch.Compute(corpus.Pages()).
//
// # URL layouts
//
// In the host layout (the default), site h is http://site<h>.example/ and
// its mirror http://mirror<h>.example/; directory pages have URLs ending in
// "/" (with index.html aliases as duplicates). Write it with WriteJSONL and
// WriteChanges for the loader's --jsonl mode.
//
// The loader's --dir mode derives each URL from a single base URL and a
// file path, so it cannot express several hosts. With Options.BaseURL set,
// the directory layout puts site h under BaseURL + "site<h>/" and its
// mirror under BaseURL + "mirror<h>/", and every page is a file: directory
// pages are "index.html" (with "index.htm" aliases as duplicates).
// WriteDir writes it; loading that directory with --base-url
// Corpus.BaseURL() yields exactly the corpus' URLs. JSON Lines work for
// both layouts.
package sample
