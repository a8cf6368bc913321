package extract

import (
	"fmt"
	"strings"
)

// The canonical percent-encoding of paths and queries (see the package
// documentation for the rule and why it is safe).

const upperHex = "0123456789ABCDEF"

// Byte classes of RFC 3986, section 2.
var (
	// unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~". Encoding these
	// never changes a URL's meaning (RFC 3986 section 2.3).
	unreserved = byteSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
	// pathRaw: the bytes a canonical path writes unescaped inside a
	// segment: pchar minus pct-encoded, that is unreserved, the sub-delims
	// "!$&'()*+,;=", ":" and "@".
	pathRaw = byteSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@")
	// queryRaw: the bytes RFC 3986 allows unescaped in a query: pchar
	// minus pct-encoded, plus "/" and "?".
	queryRaw = byteSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?")
)

type asciiSet [256]bool

func byteSet(chars string) *asciiSet {
	var s asciiSet
	for i := 0; i < len(chars); i++ {
		s[chars[i]] = true
	}
	return &s
}

// canonicalPath rewrites an escaped path (as written: it may hold raw
// spaces, non-ASCII bytes and escapes in either hex case) in the canonical
// spelling: every escape is decoded except %2F, and every byte outside
// pathRaw other than the "/" separators is escaped with uppercase hex. A "%"
// that does not start two hex digits is an error. A path that is already
// canonical is returned as is, without allocating.
func canonicalPath(p string) (string, error) {
	i, err := scanCanonicalPath(p)
	if err != nil || i == len(p) {
		return p, err
	}
	var b strings.Builder
	b.Grow(len(p) + len(p)/4)
	b.WriteString(p[:i])
	for ; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%':
			d, ok := unhexPair(p, i)
			if !ok {
				return "", badEscape(p, i, "path")
			}
			i += 2
			if d == '/' {
				// "a%2Fb" is one segment, "a/b" two: keep the difference.
				b.WriteString("%2F")
			} else {
				writePathByte(&b, d)
			}
		case c == '/':
			b.WriteByte('/')
		default:
			writePathByte(&b, c)
		}
	}
	return b.String(), nil
}

// scanCanonicalPath returns the length of p's longest prefix that is
// already canonical, or an error for an invalid escape inside that prefix.
func scanCanonicalPath(p string) (int, error) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/' || pathRaw[c]:
		case c == '%':
			d, ok := unhexPair(p, i)
			if !ok {
				return 0, badEscape(p, i, "path")
			}
			if (d != '/' && pathRaw[d]) || !isUpperHex(p[i+1]) || !isUpperHex(p[i+2]) {
				return i, nil
			}
			i += 2
		default:
			return i, nil
		}
	}
	return len(p), nil
}

func writePathByte(b *strings.Builder, c byte) {
	if pathRaw[c] {
		b.WriteByte(c)
		return
	}
	writeEscape(b, c)
}

// canonicalQuery rewrites a raw query (without its "?") in the canonical
// spelling: escapes of unreserved bytes are decoded, every other escape is
// kept with uppercase hex, bytes outside queryRaw are escaped, and a "%" that
// does not start two hex digits is taken as a literal percent sign and
// written "%25". Reserved characters are never decoded or encoded, so "+",
// "%2B", "=", "%3D", "&" and "%26" all stay distinct.
func canonicalQuery(q string) string {
	i := scanCanonicalQuery(q)
	if i == len(q) {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + len(q)/4)
	b.WriteString(q[:i])
	for ; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '%':
			d, ok := unhexPair(q, i)
			switch {
			case !ok:
				b.WriteString("%25")
			case unreserved[d]:
				b.WriteByte(d)
				i += 2
			default:
				writeEscape(&b, d)
				i += 2
			}
		case queryRaw[c]:
			b.WriteByte(c)
		default:
			writeEscape(&b, c)
		}
	}
	return b.String()
}

// scanCanonicalQuery returns the length of q's longest canonical prefix.
func scanCanonicalQuery(q string) int {
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '%':
			d, ok := unhexPair(q, i)
			if !ok || unreserved[d] || !isUpperHex(q[i+1]) || !isUpperHex(q[i+2]) {
				return i
			}
			i += 2
		case !queryRaw[c]:
			return i
		}
	}
	return len(q)
}

func writeEscape(b *strings.Builder, c byte) {
	b.WriteByte('%')
	b.WriteByte(upperHex[c>>4])
	b.WriteByte(upperHex[c&15])
}

// unhexPair decodes the two hex digits after the "%" at s[i].
func unhexPair(s string, i int) (byte, bool) {
	if i+2 >= len(s) {
		return 0, false
	}
	hi, ok1 := unhex(s[i+1])
	lo, ok2 := unhex(s[i+2])
	return hi<<4 | lo, ok1 && ok2
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func isUpperHex(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'F'
}

// badEscape describes the invalid escape at s[i] in component.
func badEscape(s string, i int, component string) error {
	return fmt.Errorf("invalid percent-escape %q in %s %q", s[i:min(i+3, len(s))], component, s)
}
