// Package query owns what answers: an Engine reads a page's view,
// searches (extract.ParseQuery's terms, scored by package scoring over the
// postings), top and site lists, a page's inlinks and outlinks, result
// snippets, the overview of the corpus, reads as of a past time, and the
// check of all of these against package batch (Verify).
//
// It imports schema (the cells it reads), ranking (a cluster's canonical
// and inbound count, and the Ranker whose rank weighs in a score) and
// scoring, and nothing that writes: the web index's Index embeds an
// Engine, so its callers ask the Index.
package query
