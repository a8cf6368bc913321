package extract

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics and that every outlink it returns
// honours the contract: a normalized http(s) URL that Normalize maps to
// itself, distinct, and not the page itself; and that text is collapsed.
func FuzzParse(f *testing.F) {
	seeds := []struct{ page, body string }{
		{testPage, `<a href="../x?q=1#f">x</a><a href="//H.com:80">h</a>`},
		{"HTTP://E.com:80", `<base href="//cdn.com/a/"><a href="b">b</a><a href="">e</a>`},
		{"https://e.com/a b", `<a href="/a b/%2F/ü?q=a b">u</a><a href="http://ÉX.com/">x</a>`},
		{testPage, `<a href="http://[::1]:80/">v6</a><a href="http://a.com:/">p</a><a href=" \n /t ">t</a>`},
		{testPage, "<title>t</title><p>a&nbsp;b<script>x</script><template>y</template></p>"},
		{testPage, "<div><p>unclosed<a href=x>a<table><tr><td><a href=y>y"},
		{testPage, "<svg><a href=/s>s</a><title>t</title></svg><math><mi>x</mi></math>"},
		{testPage, `<a href="http://a.com/%2e%2e/b">d</a><a href="HtTp://A.com/./b/../c">c</a>`},
		{"http://e.com/operator=.html", `<a href="operator%3D.html">s</a><a href="operator%28%29.html">p</a><a href="%2fx?a=%3d+%2B%zz">q</a>`},
	}
	for _, s := range seeds {
		f.Add(s.page, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, pageURL string, body []byte) {
		p, err := Parse(pageURL, strings.NewReader(string(body)), 1<<16)
		if err != nil {
			return
		}
		if again, err := Normalize(p.URL); err != nil || again != p.URL {
			t.Fatalf("page URL %q not normalized: %q, %v", p.URL, again, err)
		}
		seen := map[string]bool{}
		for _, l := range p.Links {
			if !strings.HasPrefix(l.Target, "http://") && !strings.HasPrefix(l.Target, "https://") {
				t.Fatalf("non-http target %q", l.Target)
			}
			n, err := Normalize(l.Target)
			if err != nil || n != l.Target {
				t.Fatalf("Normalize(%q) = %q, %v; want itself", l.Target, n, err)
			}
			if l.Target == p.URL {
				t.Fatalf("self link %q kept", l.Target)
			}
			if seen[l.Target] {
				t.Fatalf("duplicate target %q", l.Target)
			}
			seen[l.Target] = true
			checkCollapsed(t, l.Anchor)
		}
		checkCollapsed(t, p.Text)
		checkCollapsed(t, p.Title)
		terms := Terms(p.Text)
		for i := 1; i < len(terms); i++ {
			if terms[i-1] >= terms[i] {
				t.Fatalf("terms not sorted/distinct: %q", terms)
			}
		}
	})
}

func checkCollapsed(t *testing.T, s string) {
	t.Helper()
	if s != strings.Join(strings.Fields(s), " ") {
		t.Fatalf("text not collapsed: %q", s)
	}
}

// FuzzNormalize checks that Normalize is idempotent, that what it returns is
// spelled canonically, and that it agrees with Resolve.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"http://e.com/operator%3D.html", "HTTP://E.com:80/operator%28%29.html?x=%3d+%2B#f",
		"http://e.com/a b/%2f/é?q=a b&r=%%41", "https://e.com/a/%2E%2e/b/./c/..%2F", "http://e.com/%zz",
		"http://e.com/100%?off=50%", "http://[::1]:80/%7euser/", "http://ÉX.com/\"<>[]^`{|}", "http://e.com",
	} {
		f.Add(s)
	}
	base, err := url.Parse("http://e.com/dir/page.html?x=1")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if r, ok := Resolve(base, raw); ok {
			if again, err := Normalize(r); err != nil || again != r {
				t.Fatalf("Resolve(base, %q) = %q, which normalizes to %q, %v", raw, r, again, err)
			}
		}
		n, err := Normalize(raw)
		if err != nil {
			return
		}
		if again, err := Normalize(n); err != nil || again != n {
			t.Fatalf("Normalize(%q) = %q, but Normalize(%q) = %q, %v", raw, n, n, again, err)
		}
		u, err := url.Parse(n)
		if err != nil {
			t.Fatalf("Normalize(%q) = %q, which does not parse: %v", raw, n, err)
		}
		if p := u.EscapedPath(); !canonicalPathSyntax(p) {
			t.Fatalf("Normalize(%q) = %q: path %q not canonical", raw, n, p)
		}
		if !canonicalQuerySyntax(u.RawQuery) {
			t.Fatalf("Normalize(%q) = %q: query %q not canonical", raw, n, u.RawQuery)
		}
		if u, err := url.Parse(trimASCIISpace(raw)); err == nil {
			if r, ok := Resolve(u, ""); !ok || r != n {
				t.Fatalf("Resolve(%q, \"\") = %q, %v; Normalize gives %q", raw, r, ok, n)
			}
		}
	})
}

// FuzzCanonicalPath checks that canonicalPath keeps the meaning of a path
// (its "/"-separated segments, each decoded), fails exactly on invalid
// escapes, and spells its result canonically.
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{
		"/operator%3D.html", "/a b/%2f/%2F%3f%23%25", "/%c3%a9é\xff", "/%zz", "/100%", "/%%41", "/%25%33D",
		"/!$&'()*+,;=:@~", "/\"<>[\\]^`{|}\x00", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		want, wantErr := pathSegments(p)
		c, err := canonicalPath(p)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("canonicalPath(%q) error %v; decoding segments: %v", p, err, wantErr)
		}
		if err != nil {
			return
		}
		if got, _ := pathSegments(c); !slices.Equal(got, want) {
			t.Fatalf("canonicalPath(%q) = %q: segments %q, want %q", p, c, got, want)
		}
		if !canonicalPathSyntax(c) {
			t.Fatalf("canonicalPath(%q) = %q: not canonical", p, c)
		}
		if again, err := canonicalPath(c); err != nil || again != c {
			t.Fatalf("canonicalPath(%q) = %q, %v; want itself", c, again, err)
		}
	})
}

// FuzzCanonicalQuery checks that canonicalQuery keeps every reserved
// character as written (raw ones raw, escaped ones escaped), keeps all other
// bytes' decoded values, and spells its result canonically.
func FuzzCanonicalQuery(f *testing.F) {
	for _, s := range []string{
		"q=a+b%2B%20c&d=%3d%26", "x=%41%7e%c3%a9é \"<>[]{}", "off=50%&y=%zz%", "%%41", "a/b?c%2F%3f", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		c := canonicalQuery(q)
		if got, want := queryTokens(c), queryTokens(q); !slices.Equal(got, want) {
			t.Fatalf("canonicalQuery(%q) = %q: tokens %v, want %v", q, c, got, want)
		}
		if !canonicalQuerySyntax(c) {
			t.Fatalf("canonicalQuery(%q) = %q: not canonical", q, c)
		}
		if again := canonicalQuery(c); again != c {
			t.Fatalf("canonicalQuery(%q) = %q; want itself", c, again)
		}
	})
}

// pathSegments splits p at its raw slashes and decodes each segment.
func pathSegments(p string) ([]string, error) {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		d, err := url.PathUnescape(s)
		if err != nil {
			return nil, err
		}
		segs[i] = d
	}
	return segs, nil
}

// A queryToken is one byte of a query's meaning: a raw reserved character
// (a delimiter to whoever parses the query) or a data byte.
type queryToken struct {
	b     byte
	delim bool
}

// queryTokens decodes q leniently: a "%" not followed by two hex digits is
// a literal percent sign.
func queryTokens(q string) []queryToken {
	var toks []queryToken
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c == '%' && i+2 < len(q) && ishex(q[i+1]) && ishex(q[i+2]) {
			v, err := url.PathUnescape(q[i : i+3])
			if err != nil {
				panic(err)
			}
			toks = append(toks, queryToken{b: v[0]})
			i += 2
			continue
		}
		toks = append(toks, queryToken{b: c, delim: strings.IndexByte("!$&'()*+,;=:@/?", c) >= 0})
	}
	return toks
}

const (
	testUnreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
	testSubDelims  = "!$&'()*+,;="
)

// canonicalPathSyntax reports whether p uses only unreserved characters,
// sub-delims, ":", "@", "/" and uppercase escapes of other bytes or "/".
func canonicalPathSyntax(p string) bool {
	return canonicalSyntax(p, testUnreserved+testSubDelims+":@/", testUnreserved+testSubDelims+":@")
}

// canonicalQuerySyntax reports whether q uses only the characters RFC 3986
// allows in a query and uppercase escapes of bytes that are not unreserved.
func canonicalQuerySyntax(q string) bool {
	return canonicalSyntax(q, testUnreserved+testSubDelims+":@/?", testUnreserved)
}

func canonicalSyntax(s, raw, neverEscaped string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if strings.IndexByte(raw, c) < 0 {
				return false
			}
			continue
		}
		if i+2 >= len(s) || !strings.ContainsRune("0123456789ABCDEF", rune(s[i+1])) || !strings.ContainsRune("0123456789ABCDEF", rune(s[i+2])) {
			return false
		}
		v, _ := url.PathUnescape(s[i : i+3])
		if strings.IndexByte(neverEscaped, v[0]) >= 0 {
			return false
		}
		i += 2
	}
	return true
}

func ishex(c byte) bool {
	return strings.IndexByte("0123456789abcdefABCDEF", c) >= 0
}
