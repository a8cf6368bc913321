// Package extract turns one fetched web page into the facts the web index
// stores about it: its normalized URL, title, visible text, outlinks with
// anchor text, search terms and a content hash for duplicate clustering.
//
// Pages arrive one at a time and the index is incremental, so every function
// here is a pure function of its inputs: re-extracting the same bytes always
// yields the same Page, and the same URL spelled two ways yields one key.
//
// # Search tokens
//
// Tokenize splits a text into the tokens the index posts and a query is
// read as, all lowercased (Unicode case folding, so "Vector", "VECTOR" and
// "vector" are one term). Words are the maximal runs of letters and digits;
// they are what a text's length counts, what a query requires and what
// snippets highlight. Developers search for identifiers the way they
// write them, so an identifier is also a token of its own: "push_back",
// "std::sort", "unique_ptr", "HashMap.computeIfAbsent", "memcpy_s",
// "os.path.join" and "p->next" match a query typed whole, and their words
// (push, back; std, sort; …) match a query typed in words. Every chain of
// 2 to 4 consecutive segments of an identifier is a token as well, so
// "vector::push_back" finds a text that writes "std::vector::push_back".
// camelCase words also yield their parts ("HashMap": hash, map), so "hash
// map" finds HashMap. A query is read by ParseQuery: a result must hold
// each of its words, and one holding its identifiers whole scores higher.
//
// # Canonical URLs
//
// Every URL that becomes an index key (page URLs through Normalize, link
// targets through Resolve) is written one fixed way, so that spellings a web
// server treats as one resource are one page in the index. Normalize lists
// all the rewrites; percent-encoding is where spellings differ most.
//
// The path is decoded and re-encoded. Every %XX escape in it is decoded
// except %2F, and then each byte is written raw if it is an RFC 3986
// unreserved character (A-Z a-z 0-9 - . _ ~), a sub-delim (! $ & ' ( ) * +
// , ; =), ":" or "@", and as %XX with uppercase hex digits otherwise. "/"
// is written raw where it separates segments and as %2F where it was
// escaped. So these spellings of one path each map to the first:
//
//	/operator=.html    /operator%3D.html  /operator%3d.html
//	/operator().html   /operator%28%29.html
//	/a%20b.html        /a b.html
//	/%C3%A9.html       /é.html   /%c3%a9.html
//	/~user/            /%7Euser/          /%7euser/
//
// while "/a%2Fb", "/a%3Fb", "/a%23b" and "/a%25b" keep their escapes (with
// uppercase hex), because decoded those bytes would split a segment, start
// the query, start the fragment, or start an escape. Decoding happens before
// dot segments are removed, so "/a/%2E%2E/b" is "/b" (as in browsers).
//
// This is safe because servers map a request path to a resource by
// decoding it: the decoded bytes, together with where the "/" separators
// are, are all a server sees, and the rule keeps exactly that. RFC 3986
// allows sub-delims to be used as delimiters inside a path segment, and a
// server that did so could tell "=" from "%3D"; static file servers, which
// serve most documentation sets, do not: the file "operator=.html" is
// fetched by either spelling, and only treating the two as one page makes
// links spelled either way count. Bytes outside the sets above are not allowed
// raw in a URL, so their escaped form is the only correct spelling; raw
// non-ASCII bytes are taken as they are (UTF-8 in practice), matching what
// a browser sends for a UTF-8 page.
//
// A "%" in the path that is not followed by two hex digits ("/%zz", "/100%")
// makes the URL invalid: Normalize returns an error wrapping ErrBadURL and
// Resolve reports false. RFC 3986 gives such a path no meaning and servers
// disagree about it (many answer 400), so no key is made up for it; a
// literal percent sign in a path is written "%25".
//
// The query is treated more cautiously, because query parameters are
// decoded by applications whose delimiters (& = + ; and others) are
// reserved characters: "%26", "%3D", "%2B" and "+" mean something different
// from "&", "=", " " and "+" there. Only rewrites that cannot change what
// any decoder sees are made: escapes of unreserved characters are decoded
// (%41 is A, %7E is ~), the remaining escapes get uppercase hex, bytes RFC
// 3986 does not allow in a query (space, controls, non-ASCII, " < > [ \ ] ^
// ` { | }) are escaped, and a "%" not followed by two hex digits is
// taken as the literal percent sign lenient decoders read it as, and
// written "%25" (so "?off=50%" is "?off=50%25"). Reserved characters keep
// their spelling and parameters keep their order.
//
// The host is only lowercased (strings.ToLower): a Unicode host is then
// written as percent-encoded UTF-8 by net/url ("http://ÉX.com/" becomes
// "http://%C3%A9x.com/"); no IDNA/punycode conversion is done. Hosts with a
// raw space or backslash are invalid. Userinfo is kept as written.
package extract
