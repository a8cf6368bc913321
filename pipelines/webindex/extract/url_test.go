package extract

import (
	"errors"
	"net/url"
	"testing"
)

// Contract: keep http/https only; lowercase scheme and host; drop default
// ports; drop the fragment; empty path -> "/"; nothing else changed.
func TestNormalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"lowercase scheme and host", "HTTP://Example.COM/Path", "http://example.com/Path"},
		{"path case kept", "http://example.com/A/B", "http://example.com/A/B"},
		{"default http port dropped", "http://example.com:80/a", "http://example.com/a"},
		{"default https port dropped", "https://example.com:443/a", "https://example.com/a"},
		{"non-default port kept", "http://example.com:8080/a", "http://example.com:8080/a"},
		{"https port 80 kept", "https://example.com:80/a", "https://example.com:80/a"},
		{"http port 443 kept", "http://example.com:443/a", "http://example.com:443/a"},
		{"empty port dropped", "http://example.com:/a", "http://example.com/a"},
		{"ipv6 default port", "http://[::1]:80/", "http://[::1]/"},
		{"ipv6 other port", "http://[::1]:81/", "http://[::1]:81/"},
		{"fragment dropped", "http://example.com/a#frag", "http://example.com/a"},
		{"empty fragment dropped", "http://example.com/a#", "http://example.com/a"},
		{"empty path", "http://example.com", "http://example.com/"},
		{"empty path with query", "http://example.com?q=1", "http://example.com/?q=1"},
		{"query not reordered", "http://example.com/?b=2&a=1&A=3", "http://example.com/?b=2&a=1&A=3"},
		{"empty query kept", "http://example.com/a?", "http://example.com/a?"},
		{"trailing slash kept", "http://example.com/a/", "http://example.com/a/"},
		{"double slash kept", "http://example.com//a//b", "http://example.com//a//b"},
		{"dot segments removed as in resolution", "http://example.com/a/./b/../c", "http://example.com/a/c"},
		{"userinfo kept", "http://user:pw@Example.com/", "http://user:pw@example.com/"},
		{"surrounding whitespace trimmed", " \t\nhttp://example.com/a \r\n", "http://example.com/a"},
		{"percent-encoding kept", "http://example.com/a%2Fb%3f?x=%41", "http://example.com/a%2Fb%3f?x=%41"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Normalize(tc.in)
			if err != nil {
				t.Fatalf("Normalize(%q) error: %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
			}
			again, err := Normalize(got)
			if err != nil || again != got {
				t.Errorf("Normalize not idempotent: Normalize(%q) = %q, %v", got, again, err)
			}
		})
	}
}

// Contract: keep http/https only; invalid or unsupported -> error.
func TestNormalizeRejects(t *testing.T) {
	for _, in := range []string{
		"", "   ", "/relative/path", "example.com/a", "//example.com/a",
		"ftp://example.com/", "mailto:a@example.com", "javascript:alert(1)",
		"data:text/html,hi", "http:opaque", "http:///nohost", "http://:80/", "http://::/", "http://[]/",
		"http://exa mple.com/", "http://example.com/%zz", "http://example.com/\x00",
	} {
		if got, err := Normalize(in); err == nil {
			t.Errorf("Normalize(%q) = %q, want error", in, got)
		} else if !errors.Is(err, ErrBadURL) {
			t.Errorf("Normalize(%q) error %v does not wrap ErrBadURL", in, err)
		}
	}
}

// Documents (in doc.go) what net/url does to percent-encoding, spaces and
// Unicode hosts, so a change in net/url behaviour shows up here.
func TestNormalizeNetURLQuirks(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"%2F kept in a validly encoded path", "http://e.com/a%2Fb", "http://e.com/a%2Fb"},
		{"hex case kept", "http://e.com/%c3%a9", "http://e.com/%c3%a9"},
		{"raw space in path escaped", "http://e.com/a b", "http://e.com/a%20b"},
		{"raw space decodes %2F in same path", "http://e.com/a b/%2F", "http://e.com/a%20b//"},
		{"raw unicode in path escaped", "http://e.com/ü", "http://e.com/%C3%BC"},
		{"%2E%2E is not a dot segment", "http://e.com/a/%2E%2E/b", "http://e.com/a/%2E%2E/b"},
		{"raw space in query kept", "http://e.com/?q=a b", "http://e.com/?q=a b"},
		{"unicode host lowercased and escaped", "http://ÉX.com/", "http://%C3%A9x.com/"},
		{"escaped unicode host lowercased", "http://%C3%89x.com/", "http://%C3%A9x.com/"},
		{"punycode host untouched", "http://XN--E-X.com/", "http://xn--e-x.com/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Normalize(tc.in)
			if err != nil {
				t.Fatalf("Normalize(%q) error: %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again, _ := Normalize(got); again != got {
				t.Errorf("not idempotent: %q -> %q", got, again)
			}
		})
	}
}

// Contract: resolve each <a href> against the page URL (RFC 3986), keep
// http/https only, then normalize; an empty href is the base itself.
func TestResolve(t *testing.T) {
	base, err := url.Parse("http://Example.com/dir/page.html?x=1#top")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, href, want string
		ok               bool
	}{
		{"relative file", "other.html", "http://example.com/dir/other.html", true},
		{"parent dir", "../up.html", "http://example.com/up.html", true},
		{"too many parents", "../../../x", "http://example.com/x", true},
		{"dot", "./", "http://example.com/dir/", true},
		{"query only", "?q=2", "http://example.com/dir/page.html?q=2", true},
		{"fragment only is the base", "#sec", "http://example.com/dir/page.html?x=1", true},
		{"empty is the base", "", "http://example.com/dir/page.html?x=1", true},
		{"whitespace only is the base", " \n\t", "http://example.com/dir/page.html?x=1", true},
		{"absolute path", "/root", "http://example.com/root", true},
		{"protocol-relative", "//Other.ORG:80/x", "http://other.org/x", true},
		{"absolute https", "HTTPS://a.com:443", "https://a.com/", true},
		{"absolute with dots", "http://a.com/b/../c", "http://a.com/c", true},
		{"whitespace around", "  \n other.html\t ", "http://example.com/dir/other.html", true},
		{"javascript", "javascript:void(0)", "", false},
		{"mailto", "mailto:x@example.com", "", false},
		{"data", "data:text/plain,hi", "", false},
		{"tel", "tel:+123", "", false},
		{"ftp", "ftp://example.com/f", "", false},
		{"unparsable", "http://a.com/%zz", "", false},
		{"bad host", "http://a b/", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Resolve(base, tc.href)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Resolve(%q) = %q, %v; want %q, %v", tc.href, got, ok, tc.want, tc.ok)
			}
		})
	}
	if got, ok := Resolve(nil, "http://a.com/"); ok {
		t.Errorf("Resolve(nil, ...) = %q, true; want false", got)
	}
}
