package extract

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrBadURL is wrapped by every error Normalize returns, so callers can tell
// "this URL cannot be indexed" apart from I/O problems with errors.Is.
var ErrBadURL = errors.New("extract: unsupported URL")

// Normalize returns the canonical form of an absolute http or https URL, so
// that two spellings of the same page map to one index key.
//
// Exactly these changes are made, and nothing else:
//   - leading and trailing ASCII whitespace is trimmed (as HTML does for
//     attribute URLs);
//   - the path's percent-encoding is made canonical: every escape is
//     decoded except %2F, then every byte other than the "/" separators and
//     the RFC 3986 unreserved characters, sub-delims, ":" and "@" is escaped
//     with uppercase hex (so "operator%3D.html" becomes "operator=.html",
//     "a b" becomes "a%20b", "é" becomes "%C3%A9", "%3f" becomes "%3F");
//   - the URL is then treated as an absolute RFC 3986 reference, so dot
//     segments ("." and "..", including spellings such as "%2E%2E") in its
//     path are removed as reference resolution does;
//   - the query's percent-encoding is made canonical without touching
//     reserved characters: escapes of unreserved characters are decoded,
//     other escapes get uppercase hex, bytes RFC 3986 does not allow in a
//     query (space, non-ASCII, '"', '<', '[', ...) are escaped, and a "%"
//     not followed by two hex digits becomes "%25". Parameters are not
//     reordered, and "+", "%2B", "%20", "=", "%3D", "&" and "%26" stay as
//     written;
//   - scheme and host are lowercased (strings.ToLower, so Unicode hosts too);
//   - the default port (:80 for http, :443 for https) and an empty port
//     ("host:") are dropped;
//   - the fragment is dropped;
//   - an empty path becomes "/".
//
// See the package documentation for why these rewrites are safe. Anything
// that is not an absolute http(s) URL with a non-empty host, and a path
// holding a "%" not followed by two hex digits ("/%zz", "/100%"), is
// rejected with an error wrapping ErrBadURL that quotes raw.
//
// Normalize is idempotent: Normalize(Normalize(x)) == Normalize(x).
func Normalize(raw string) (string, error) {
	u, err := url.Parse(trimASCIISpace(raw))
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadURL, raw, err)
	}
	if !u.IsAbs() {
		return "", fmt.Errorf("%w: %q is not absolute", ErrBadURL, raw)
	}
	// Resolving u against an empty base applies RFC 3986 section 5.2.2 for
	// a reference that has a scheme: the path's dot segments are removed and
	// everything else is copied. This makes Normalize agree with Resolve for
	// absolute hrefs.
	s, err := resolve(&url.URL{}, u)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadURL, raw, err)
	}
	return s, nil
}

// CanonicalURL is a URL in the canonical form Normalize returns. Only
// NormalizeURL makes one (the zero value is no URL), so code that holds
// one need not normalize it again: a loader normalizes each record's URL
// once and passes it on to ParseCanonical and the index.
type CanonicalURL struct{ s string }

// NormalizeURL is Normalize, returning the URL as a CanonicalURL.
func NormalizeURL(raw string) (CanonicalURL, error) {
	s, err := Normalize(raw)
	return CanonicalURL{s}, err
}

// String returns the URL; "" for the zero CanonicalURL.
func (u CanonicalURL) String() string { return u.s }

// IsZero reports whether u is the zero CanonicalURL, which is no URL.
func (u CanonicalURL) IsZero() bool { return u.s == "" }

// Resolve resolves href (an <a href> or <base href> value) against base and
// normalizes the result with the same rules as Normalize; base's own path
// and query need not be canonical. It reports ok=false when href cannot be
// parsed (including an invalid percent-escape in its path) or does not
// resolve to an http(s) URL (javascript:, mailto:, data:, ...). An empty href
// resolves to base itself, as RFC 3986 says; the fragment is then dropped
// like any other.
func Resolve(base *url.URL, href string) (string, bool) {
	if base == nil {
		return "", false
	}
	ref, err := url.Parse(trimASCIISpace(href))
	if err != nil {
		return "", false
	}
	s, err := resolve(base, ref)
	if err != nil {
		return "", false
	}
	return s, true
}

// resolve makes the paths of base and ref canonical, resolves ref against
// base and returns the canonical form of the result. The paths are made
// canonical first so that dot segments are recognised however they are
// spelled, and so that net/url, which resolves the escaped forms of the
// paths, never re-escapes a path from its decoded form (which would turn
// %2F into "/").
func resolve(base, ref *url.URL) (string, error) {
	b, err := withCanonicalPath(base)
	if err != nil {
		return "", err
	}
	r, err := withCanonicalPath(ref)
	if err != nil {
		return "", err
	}
	t := b.ResolveReference(r)
	if r.Scheme == "" && r.Host == "" && r.User == nil && r.Path == "" && r.RawQuery == "" && !r.ForceQuery {
		// RFC 3986 copies the base's query, even an empty one ("a?");
		// net/url copies RawQuery but not ForceQuery.
		t.ForceQuery = b.ForceQuery
	}
	return canonical(t)
}

// withCanonicalPath returns u, or a copy of u whose path is spelled
// canonically.
func withCanonicalPath(u *url.URL) (*url.URL, error) {
	raw := escapedPath(u)
	p, err := canonicalPath(raw)
	if err != nil {
		return nil, err
	}
	if p == raw && p == u.EscapedPath() {
		return u, nil
	}
	v := *u
	if v.Path, err = url.PathUnescape(p); err != nil {
		return nil, err // cannot happen: p came out of canonicalPath
	}
	v.RawPath = p
	return &v, nil
}

// escapedPath returns u's path as it was written. url.Parse keeps that
// spelling in RawPath whenever it differs from net/url's default encoding;
// EscapedPath would instead re-escape Path when RawPath holds bytes that
// need escaping (a raw space, say), losing the difference between "/" and
// %2F.
func escapedPath(u *url.URL) string {
	if u.RawPath != "" {
		if p, err := url.PathUnescape(u.RawPath); err == nil && p == u.Path {
			return u.RawPath
		}
	}
	return u.EscapedPath()
}

// canonical applies the remaining normalization steps to a resolved URL.
// Its path is put through withCanonicalPath once more: for what resolve
// passes in that changes nothing, and it guarantees that String writes the
// canonical spelling whatever net/url chose to keep in RawPath.
func canonical(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Opaque != "" {
		return "", errors.New("opaque URL has no host")
	}
	host, err := canonicalHost(scheme, strings.ToLower(u.Host))
	if err != nil {
		return "", err
	}
	v, err := withCanonicalPath(u)
	if err != nil {
		return "", err
	}
	w := *v
	w.Scheme = scheme
	w.Host = host
	w.RawQuery = canonicalQuery(w.RawQuery)
	w.Fragment = ""
	w.RawFragment = ""
	if w.Path == "" {
		w.Path, w.RawPath = "/", ""
	}
	return w.String(), nil
}

// canonicalHost drops an empty or default port from a lowercased host and
// rejects hosts with no name, including ones net/url lets through such as
// "::" (name ":" with an empty port) or "[]".
func canonicalHost(scheme, host string) (string, error) {
	name, port := host, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", fmt.Errorf("unterminated IP literal in host %q", host)
		}
		name, port = host[:end+1], strings.TrimPrefix(host[end+1:], ":")
		if name == "[]" {
			return "", fmt.Errorf("empty IP literal in host %q", host)
		}
	} else {
		if i := strings.LastIndexByte(host, ':'); i >= 0 {
			name, port = host[:i], host[i+1:]
		}
		if name == "" || strings.Contains(name, ":") {
			return "", fmt.Errorf("invalid host %q", host)
		}
	}
	if port == "" || scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		return name, nil
	}
	return name + ":" + port, nil
}

// trimASCIISpace strips the ASCII whitespace HTML allows around URLs
// (tab, LF, FF, CR, space).
func trimASCIISpace(s string) string {
	return strings.Trim(s, "\t\n\f\r ")
}
