// Package extract turns one fetched web page into the facts the web index
// stores about it: its normalized URL, title, visible text, outlinks with
// anchor text, search terms and a content hash for duplicate clustering.
//
// Pages arrive one at a time and the index is incremental, so every function
// here is a pure function of its inputs: re-extracting the same bytes always
// yields the same Page, and the same URL spelled two ways yields one key.
//
// # What net/url does to percent-encoding
//
// Normalization keeps the path and query "as given", but it goes through
// net/url, which rewrites a few things (pinned by TestNormalizeNetURLQuirks):
//   - A path made only of validly encoded characters keeps its exact
//     spelling, including %2F and the case of hex digits ("/a%2Fb" stays).
//   - A path containing a raw space or raw non-ASCII character is re-escaped
//     from its decoded form: spaces become %20, non-ASCII becomes UTF-8
//     percent-escapes, and as a side effect an escaped slash %2F in the same
//     path is decoded to "/".
//   - %2E%2E is not treated as a dot segment (net/url only removes literal
//     "." and "..").
//   - The query is kept byte for byte, even a raw space; a lone "?" is kept.
//   - A Unicode host is lowercased and then written as percent-encoded UTF-8
//     ("http://ÉX.com/" becomes "http://%C3%A9x.com/"); no IDNA/punycode
//     conversion is done. Hosts with a raw space or backslash are invalid.
package extract
