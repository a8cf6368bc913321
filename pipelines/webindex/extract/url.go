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
//   - the URL is treated as an absolute RFC 3986 reference, so dot segments
//     ("." and "..") in its path are removed as reference resolution does;
//   - scheme and host are lowercased (strings.ToLower, so Unicode hosts too);
//   - the default port (:80 for http, :443 for https) and an empty port
//     ("host:") are dropped;
//   - the fragment is dropped;
//   - an empty path becomes "/".
//
// Query strings are not reordered or re-encoded. Percent-encoding is kept as
// given as far as net/url allows; see the package documentation for the
// cases where net/url rewrites it. Leading and trailing ASCII whitespace is
// trimmed first (as HTML does for attribute URLs). Anything that is not an
// absolute http(s) URL with a non-empty host is rejected with an error
// wrapping ErrBadURL.
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
	s, err := canonical((&url.URL{}).ResolveReference(u))
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrBadURL, raw, err)
	}
	return s, nil
}

// Resolve resolves href (an <a href> or <base href> value) against base and
// normalizes the result with the same rules as Normalize. It reports
// ok=false when href cannot be parsed or does not resolve to an http(s) URL
// (javascript:, mailto:, data:, ...). An empty href resolves to base itself,
// as RFC 3986 says; the fragment is then dropped like any other.
func Resolve(base *url.URL, href string) (string, bool) {
	if base == nil {
		return "", false
	}
	ref, err := url.Parse(trimASCIISpace(href))
	if err != nil {
		return "", false
	}
	s, err := canonical(base.ResolveReference(ref))
	if err != nil {
		return "", false
	}
	return s, true
}

// canonical applies the normalization steps to an already resolved URL.
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
	v := *u
	v.Scheme = scheme
	v.Host = host
	v.Fragment = ""
	v.RawFragment = ""
	if v.Path == "" {
		v.Path, v.RawPath = "/", ""
	}
	return v.String(), nil
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
