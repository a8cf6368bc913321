package extract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// ErrTooLarge is wrapped by Parse when the body exceeds maxBytes, so the
// pipeline can skip (and count) oversized pages instead of exhausting memory.
var ErrTooLarge = errors.New("extract: body too large")

// ErrNotHTML is wrapped by Parse when the body looks binary rather than like
// an HTML document, so images, archives and the like never reach the index.
var ErrNotHTML = errors.New("extract: body is not HTML")

// sniffLen is how many leading bytes Parse inspects to decide ErrNotHTML.
const sniffLen = 1024

// maxInvalidPercent is the share of the sniffed bytes, in percent, that may
// be invalid UTF-8 before the body is declared binary. It tolerates a few
// Latin-1 characters in an undeclared legacy page but not random bytes.
const maxInvalidPercent = 10

// Link is one outlink of a page: a normalized target and the anchor text the
// index uses to describe the target.
type Link struct {
	// Target is the normalized absolute http(s) URL linked to.
	Target string
	// Anchor is the text of the first <a> to Target with non-empty text,
	// or "" when every link to Target is textless (e.g. image-only).
	Anchor string
}

// Page is everything the index keeps from one fetched document.
type Page struct {
	// URL is the normalized page URL; it is the page's key in the index.
	URL string
	// Title is the text of the first HTML <title>, or "".
	Title string
	// Text is the text of the whole document, title included.
	Text string
	// Links are the distinct outlinks other than URL itself, in order of
	// first appearance.
	Links []Link
	// MoreAnchors are the other anchors of those links: for each <a> to a
	// target of Links whose non-empty text is neither that link's Anchor
	// nor an earlier one of these, its target and text, in document
	// order. A page often links to one target from several places
	// ("install", "download", "get started"), and each text says
	// something about the target.
	MoreAnchors []Link
}

// Parse extracts a Page from an HTML body fetched from pageURL.
//
// pageURL is normalized first and must be http or https. At most maxBytes
// bytes of body are read (maxBytes must be positive); a longer body yields
// an error wrapping ErrTooLarge, a binary-looking one (a NUL byte in the
// first 1024 bytes, or more than 10% invalid UTF-8 there) an error wrapping
// ErrNotHTML. The body is assumed to be UTF-8; no charset conversion is done.
// Broken markup is repaired as browsers do, except that x/net/html refuses
// documents nesting more than 512 open elements; that is returned as a
// plain parse error naming the page.
func Parse(pageURL string, body io.Reader, maxBytes int64) (*Page, error) {
	u, err := NormalizeURL(pageURL)
	if err != nil {
		return nil, fmt.Errorf("extract: page URL: %w", err)
	}
	return ParseCanonical(u, body, maxBytes)
}

// ParseCanonical is Parse for a page URL already normalized, which it does
// not normalize again.
func ParseCanonical(u CanonicalURL, body io.Reader, maxBytes int64) (*Page, error) {
	if u.IsZero() {
		return nil, fmt.Errorf("extract: page URL: %w: the zero CanonicalURL", ErrBadURL)
	}
	self := u.String()
	if maxBytes <= 0 {
		return nil, fmt.Errorf("extract: maxBytes must be positive, got %d", maxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("extract: reading body of %s: %w", self, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("%w: %s has more than %d bytes", ErrTooLarge, self, maxBytes)
	}
	if err := sniff(data); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotHTML, self, err)
	}
	doc, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("extract: parsing %s: %w", self, err)
	}

	selfURL, err := url.Parse(self)
	if err != nil { // cannot happen: self came out of Normalize
		return nil, fmt.Errorf("extract: reparsing %s: %w", self, err)
	}
	p := &Page{URL: self, Text: textOf(doc)}
	if t := find(doc, atom.Title, ""); t != nil {
		p.Title = textOf(t)
	}

	// The first <base href> in the document, resolved against the page URL.
	// A base that does not resolve to http(s) is ignored.
	base := selfURL
	if b := find(doc, atom.Base, "href"); b != nil {
		if s, ok := Resolve(selfURL, attr(b, "href")); ok {
			if u, err := url.Parse(s); err == nil {
				base = u
			}
		}
	}

	index := map[string]int{}
	kept := map[Link]bool{} // (target, anchor) pairs kept
	walk(doc, func(n *html.Node) {
		if !isHTML(n, atom.A) || !hasAttr(n, "href") {
			return
		}
		target, ok := Resolve(base, attr(n, "href"))
		if !ok || target == self {
			return
		}
		i, seen := index[target]
		if !seen {
			i = len(p.Links)
			index[target] = i
			p.Links = append(p.Links, Link{Target: target})
		}
		a := textOf(n)
		switch {
		case a == "" || kept[Link{target, a}]:
		case p.Links[i].Anchor == "":
			p.Links[i].Anchor = a
		default:
			p.MoreAnchors = append(p.MoreAnchors, Link{target, a})
		}
		kept[Link{target, a}] = true
	})
	return p, nil
}

// sniff rejects bodies whose first bytes look binary.
func sniff(data []byte) error {
	head := data[:min(len(data), sniffLen)]
	if i := bytes.IndexByte(head, 0); i >= 0 {
		return fmt.Errorf("NUL byte at offset %d", i)
	}
	invalid := countInvalid(head, len(head) < len(data))
	if invalid*100 > len(head)*maxInvalidPercent {
		return fmt.Errorf("%d of the first %d bytes are invalid UTF-8", invalid, len(head))
	}
	return nil
}

// countInvalid counts the bytes of head that are not part of valid UTF-8.
// When cut is true head was truncated from a longer body, and an incomplete
// rune at its end is not counted: the window split it, it is not evidence.
func countInvalid(head []byte, cut bool) int {
	invalid := 0
	for i := 0; i < len(head); {
		if cut && !utf8.FullRune(head[i:]) {
			break
		}
		r, w := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && w == 1 {
			invalid++
		}
		i += w
	}
	return invalid
}

// textOf returns the text of node n as the index defines it: the descendant
// text nodes in document order, skipping anything inside script, style,
// noscript and template (which browsers do not render as text), joined with
// single spaces, with every run of Unicode whitespace (including U+00A0)
// collapsed to one space and the ends trimmed. Joining with spaces means
// "a<b>b</b>" yields "a b": element boundaries always separate words.
func textOf(n *html.Node) string {
	var parts []string
	var visit func(*html.Node)
	visit = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			parts = append(parts, n.Data)
			return
		case html.ElementNode:
			switch n.DataAtom {
			case atom.Script, atom.Style, atom.Noscript, atom.Template:
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			visit(c)
		}
	}
	visit(n)
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}

// TextHash returns the hex SHA-256 of text, the key under which pages with
// identical text are clustered as duplicates. Empty text returns "" so that
// textless pages (redirect stubs, frames) never form one giant cluster.
func TextHash(text string) string {
	if text == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// walk calls f for every node under n in document order.
func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

// find returns the first HTML element a in document order, restricted to
// elements carrying attribute key when key is not empty.
func find(n *html.Node, a atom.Atom, key string) *html.Node {
	if isHTML(n, a) && (key == "" || hasAttr(n, key)) {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if m := find(c, a, key); m != nil {
			return m
		}
	}
	return nil
}

// isHTML reports whether n is an element a in the HTML namespace (so an SVG
// <title> or <a> does not count).
func isHTML(n *html.Node, a atom.Atom) bool {
	return n.Type == html.ElementNode && n.Namespace == "" && n.DataAtom == a
}

// hasAttr reports whether n has attribute key (no namespace).
func hasAttr(n *html.Node, key string) bool {
	for _, at := range n.Attr {
		if at.Namespace == "" && at.Key == key {
			return true
		}
	}
	return false
}

// attr returns the first value of attribute key on n, as HTML keeps the
// first of duplicated attributes.
func attr(n *html.Node, key string) string {
	for _, at := range n.Attr {
		if at.Namespace == "" && at.Key == key {
			return at.Val
		}
	}
	return ""
}
