package extract

import (
	"errors"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Contract: keep http/https only; lowercase scheme and host; drop default
// ports; drop the fragment; empty path -> "/"; canonical percent-encoding
// (TestNormalizeEquivalent); nothing else changed.
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
		{"percent-encoding made canonical", "http://example.com/a%2fb%3f%41?x=%41%3d", "http://example.com/a%2Fb%3FA?x=A%3D"},
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
		"http://example.com/100%", "http://example.com/%", "http://example.com/%4", "http://example.com/%4g?q",
		"http://example.com/%%41",
	} {
		if got, err := Normalize(in); err == nil {
			t.Errorf("Normalize(%q) = %q, want error", in, got)
		} else if !errors.Is(err, ErrBadURL) {
			t.Errorf("Normalize(%q) error %v does not wrap ErrBadURL", in, err)
		} else if !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("Normalize(%q) error %q does not name the URL", in, err)
		}
	}
}

// Contract (doc.go, "Canonical URLs"): every spelling in a group is one
// page and normalizes to the group's first entry.
func TestNormalizeEquivalent(t *testing.T) {
	groups := []struct {
		name  string
		forms []string
	}{
		{"escaped sub-delim =", []string{"http://e.com/operator=.html", "http://e.com/operator%3D.html", "http://e.com/operator%3d.html"}},
		{"escaped sub-delim +", []string{"http://e.com/operator+.html", "http://e.com/operator%2B.html", "http://e.com/operator%2b.html"}},
		{"escaped parentheses", []string{"http://e.com/operator().html", "http://e.com/operator%28%29.html", "http://e.com/operator(%29.html"}},
		{"all sub-delims, : and @", []string{"http://e.com/!$&'()*+,;=:@", "http://e.com/%21%24%26%27%28%29%2A%2B%2C%3B%3D%3A%40"}},
		{"escaped unreserved", []string{"http://e.com/~user/a-b_c.d", "http://e.com/%7Euser/%61%2D%62%5F%63%2E%64", "http://e.com/%7euser/a-b_c.d"}},
		{"space", []string{"http://e.com/a%20b.html", "http://e.com/a b.html"}},
		{"raw UTF-8 vs escaped, either hex case", []string{"http://e.com/%C3%A9.html", "http://e.com/é.html", "http://e.com/%c3%a9.html", "http://e.com/%C3%a9.html"}},
		{"non-UTF-8 byte", []string{"http://e.com/%FF", "http://e.com/%ff", "http://e.com/\xff"}},
		{"bytes not allowed raw", []string{`http://e.com/%22%3C%3E%5B%5C%5D%5E%60%7B%7C%7D`, "http://e.com/\"<>[\\]^`{|}", "http://e.com/%22%3c%3e%5b%5c%5d%5e%60%7b%7c%7d"}},
		{"escaped slash stays escaped", []string{"http://e.com/a%2Fb", "http://e.com/a%2fb"}},
		{"escaped slash next to a raw space", []string{"http://e.com/a%20b/%2F", "http://e.com/a b/%2F", "http://e.com/a b/%2f"}},
		{"escaped ? and # stay escaped", []string{"http://e.com/a%3Fb%23c", "http://e.com/a%3fb%23c"}},
		{"escaped percent stays escaped", []string{"http://e.com/100%25", "http://e.com/100%25"}},
		{"escaped percent is not decoded twice", []string{"http://e.com/%253D", "http://e.com/%25%33D", "http://e.com/%25%33%44"}},
		{"escaped dot segments", []string{"http://e.com/b", "http://e.com/a/%2E%2E/b", "http://e.com/a/%2e./b", "http://e.com/a/%2E/../b"}},
		{"escaped dots in a name", []string{"http://e.com/..%2F", "http://e.com/%2e%2E%2f"}},
		{"query: escaped unreserved decoded", []string{"http://e.com/?q=A-z~", "http://e.com/?q=%41%2Dz%7e"}},
		{"query: other escapes get uppercase hex", []string{"http://e.com/?q=%C3%A9%3D%2B%26", "http://e.com/?q=%c3%a9%3d%2b%26"}},
		{"query: bytes not allowed raw", []string{"http://e.com/?q=a%20b%C3%A9%22%3C%5B%5D%7B%7D", "http://e.com/?q=a bé\"<[]{}"}},
		{"query: stray percent is literal", []string{"http://e.com/?off=50%25&x=%25zz", "http://e.com/?off=50%&x=%zz"}},
		{"query: stray percent before an escape", []string{"http://e.com/?x=%25A", "http://e.com/?x=%%41"}},
		{"path and query together", []string{"http://e.com/operator=.html?x=%3D%3D", "HTTP://E.com:80/operator%3d.html?x=%3d%3D#f"}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			want := g.forms[0]
			for _, in := range g.forms {
				got, err := Normalize(in)
				if err != nil {
					t.Fatalf("Normalize(%q) error: %v", in, err)
				}
				if got != want {
					t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
				}
			}
			if again, err := Normalize(want); err != nil || again != want {
				t.Errorf("not idempotent: %q -> %q, %v", want, again, err)
			}
		})
	}
}

// Contract: spellings that can mean different resources stay different.
func TestNormalizeDistinct(t *testing.T) {
	for _, pair := range [][2]string{
		{"http://e.com/a/b", "http://e.com/a%2Fb"},
		{"http://e.com/a?b", "http://e.com/a%3Fb"},
		{"http://e.com/a#b", "http://e.com/a%23b"},
		{"http://e.com/a%2541", "http://e.com/a%41"},
		{"http://e.com/a", "http://e.com/A"},
		{"http://e.com/?a=1&b=2", "http://e.com/?a=1%26b=2"},
		{"http://e.com/?a=1", "http://e.com/?a%3D1"},
		{"http://e.com/?q=a+b", "http://e.com/?q=a%2Bb"},
		{"http://e.com/?q=a+b", "http://e.com/?q=a%20b"},
		{"http://e.com/?q=a/b", "http://e.com/?q=a%2Fb"},
		{"http://e.com/?q=(a)", "http://e.com/?q=%28a%29"},
		{"http://e.com/?b=2&a=1", "http://e.com/?a=1&b=2"},
		{"http://e.com/a", "http://e.com/a?"},
	} {
		a, errA := Normalize(pair[0])
		b, errB := Normalize(pair[1])
		if errA != nil || errB != nil {
			t.Fatalf("Normalize(%q), Normalize(%q): %v, %v", pair[0], pair[1], errA, errB)
		}
		if a == b {
			t.Errorf("%q and %q both normalize to %q", pair[0], pair[1], a)
		}
	}
}

// Unicode hosts are lowercased and escaped by net/url, not converted to
// punycode; pinned so that a change in net/url shows up here.
func TestNormalizeHost(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
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
		{"relative with stray percent", "100%.html", "", false},
		{"escaped sub-delim", "operator%3D.html", "http://example.com/dir/operator=.html", true},
		{"escaped parentheses", "operator%28%29.html", "http://example.com/dir/operator().html", true},
		{"raw space and UTF-8", "a b/é.html", "http://example.com/dir/a%20b/%C3%A9.html", true},
		{"escaped dot segment", "%2E%2E/up.html", "http://example.com/up.html", true},
		{"escaped slash is not a separator", "a%2f..%2F../x", "http://example.com/dir/a%2F..%2F../x", true},
		{"escaped slash survives resolution", "a%2Fb/../c", "http://example.com/dir/c", true},
		{"escaped slash kept", "../a%2Fb", "http://example.com/a%2Fb", true},
		{"query made canonical", "?q=%7e%3d", "http://example.com/dir/page.html?q=~%3D", true},
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
	emptyQuery, err := url.Parse("http://e.com/a?")
	if err != nil {
		t.Fatal(err)
	}
	for _, href := range []string{"", "#f"} {
		if got, ok := Resolve(emptyQuery, href); got != "http://e.com/a?" || !ok {
			t.Errorf("Resolve(%q, %q) = %q, %v; want the base with its empty query", emptyQuery, href, got, ok)
		}
	}
	if got, ok := Resolve(nil, "http://a.com/"); ok {
		t.Errorf("Resolve(nil, ...) = %q, true; want false", got)
	}
}

// BenchmarkNormalize measures Normalize on a URL already in canonical form
// (the common case: links written plainly) and on one that is rewritten.
func BenchmarkNormalize(b *testing.B) {
	for _, bc := range []struct{ name, in string }{
		{"canonical", "http://example.com/w/cpp/language/operators.html?q=1"},
		{"rewritten", "HTTP://Example.com:80/w/cpp/language/operator%3d%28%29 %c3%a9.html?q=%7e#f"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Normalize(bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkResolve measures resolving a relative link, as Parse does for
// every <a href>.
func BenchmarkResolve(b *testing.B) {
	base, err := url.Parse("http://example.com/w/cpp/language/operators.html")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, href string }{
		{"canonical", "../utility/move.html"},
		{"rewritten", "../utility/operator%3D.html"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, ok := Resolve(base, bc.href); !ok {
					b.Fatal("not resolved")
				}
			}
		})
	}
}

// NormalizeURL is Normalize, typed; ParseCanonical of its URL is Parse of
// the raw one; the zero CanonicalURL is no URL.
func TestCanonicalURL(t *testing.T) {
	const raw, body = " HTTP://Example.COM:80/a/../b%3d?x#f", `<title>t</title><a href="c">c</a>`
	u, err := NormalizeURL(raw)
	want, werr := Normalize(raw)
	if err != nil || werr != nil || u.String() != want || u.IsZero() {
		t.Fatalf("NormalizeURL(%q) = %q, %v; Normalize: %q, %v", raw, u, err, want, werr)
	}
	if _, err := NormalizeURL("/relative"); !errors.Is(err, ErrBadURL) {
		t.Fatalf("NormalizeURL of a relative URL: %v", err)
	}
	got, err := ParseCanonical(u, strings.NewReader(body), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(raw, strings.NewReader(body), 1<<10)
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("ParseCanonical: %+v; Parse: %+v, %v", got, p, err)
	}
	if _, err := ParseCanonical(CanonicalURL{}, strings.NewReader(body), 1<<10); !errors.Is(err, ErrBadURL) {
		t.Fatalf("ParseCanonical of the zero CanonicalURL: %v", err)
	}
}
