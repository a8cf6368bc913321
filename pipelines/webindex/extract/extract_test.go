package extract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

const testPage = "http://example.com/dir/page.html"

func mustParse(t *testing.T, pageURL, body string) *Page {
	t.Helper()
	p, err := Parse(pageURL, strings.NewReader(body), 1<<20)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

// Contract: text = descendant text nodes in document order, skipping
// script/style/noscript/template, joined with single spaces, whitespace runs
// collapsed, ends trimmed; page text includes the title.
func TestText(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"nested inline elements", "<p>Hello <b>bold <i>italic</i></b> world</p>", "Hello bold italic world"},
		{"element boundaries separate words", "<p>Hel<b>lo</b></p>", "Hel lo"},
		{"script skipped", "<p>a<script>var x = 1;</script>b</p>", "a b"},
		{"style skipped", "<style>p{color:red}</style><p>a</p>", "a"},
		{"noscript skipped", "<p>a</p><noscript><p>enable js</p></noscript><p>b</p>", "a b"},
		{"template skipped", "<p>a</p><template><p>hidden</p></template><p>b</p>", "a b"},
		{"nested inside skipped", "<div>x<script><b>no</b></script>y</div>", "x y"},
		{"whitespace collapsed", "<p>  a \n\n\t b\r\n c  </p>", "a b c"},
		{"nbsp collapsed", "<p>a&nbsp;&nbsp;b\u00a0c</p>", "a b c"},
		{"other unicode space", "<p>a\u2003\u3000b</p>", "a b"},
		{"entities decoded", "<p>&lt;tag&gt; &amp; &quot;q&quot; &eacute; &#x263A; &#65;</p>", "<tag> & \"q\" é ☺ A"},
		{"comments skipped", "<p>a<!-- hidden -->b</p>", "a b"},
		{"title included", "<title> The  Title </title><body><p>body</p></body>", "The Title body"},
		{"attributes not text", `<img alt="pic"><a title="t" href="/x">link</a>`, "link"},
		{"empty document", "", ""},
		{"unclosed tags", "<div><p>one<p>two<b>three<i>four</div>five", "one two three four five"},
		{"stray end tags ignored; adjacent text is one node", "</p></div>a</span>b", "ab"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustParse(t, testPage, tc.body).Text; got != tc.want {
				t.Errorf("Text = %q, want %q", got, tc.want)
			}
		})
	}
}

// Contract: title = text of the first <title>, "" if none.
func TestTitle(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"simple", "<title>Hi</title>", "Hi"},
		{"whitespace and entities", "<title>\n  A &amp;\tB  </title>", "A & B"},
		{"first wins", "<title>one</title><body><title>two</title>", "one"},
		{"none", "<p>no title</p>", ""},
		{"tags inside title are text", "<title>a <b>b</b></title>", "a <b>b</b>"},
		{"svg title is not the page title", "<body><svg><title>icon</title></svg></body>", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustParse(t, testPage, tc.body).Title; got != tc.want {
				t.Errorf("Title = %q, want %q", got, tc.want)
			}
		})
	}
}

// Contract: outlinks = distinct normalized targets other than the page
// itself, in order of first appearance; anchor = text of the first <a> to
// the target whose text is non-empty.
func TestLinks(t *testing.T) {
	tests := []struct {
		name, page, body string
		want             []Link
	}{
		{
			name: "resolved and normalized",
			body: `<a href="a.html">A</a><a href="../b">B</a><a href="?q=1">Q</a><a href="//Other.com:80">O</a>`,
			want: []Link{
				{"http://example.com/dir/a.html", "A"},
				{"http://example.com/b", "B"},
				{"http://example.com/dir/page.html?q=1", "Q"},
				{"http://other.com/", "O"},
			},
		},
		{
			name: "deduplicated in first-appearance order",
			body: `<a href="/x">1</a><a href="/y">2</a><a href="/x#f">3</a><a href="HTTP://EXAMPLE.COM:80/x">4</a>`,
			want: []Link{{"http://example.com/x", "1"}, {"http://example.com/y", "2"}},
		},
		{
			name: "percent-encoding spellings are one target",
			page: "http://example.com/cpp/operator=.html",
			body: `<a href="operator%3D.html">self</a><a href="operator%2B.html">plus</a><a href="operator+.html">p2</a>` +
				`<a href="operator%28%29.html">call</a><a href="operator().html">c2</a><a href="%C3%A9.html">e</a><a href="é.html">e2</a>` +
				`<a href="a%2Fb.html">slash</a><a href="a/b.html">sep</a>`,
			want: []Link{
				{"http://example.com/cpp/operator+.html", "plus"},
				{"http://example.com/cpp/operator().html", "call"},
				{"http://example.com/cpp/%C3%A9.html", "e"},
				{"http://example.com/cpp/a%2Fb.html", "slash"},
				{"http://example.com/cpp/a/b.html", "sep"},
			},
		},
		{
			name: "self links removed",
			body: `<a href="">e</a><a href="#top">t</a><a href="page.html">p</a><a href="HTTP://example.com:80/dir/page.html#x">u</a><a href="/z">z</a>`,
			want: []Link{{"http://example.com/z", "z"}},
		},
		{
			name: "self is compared after normalizing the page URL",
			page: "HTTP://Example.com:80/dir/page.html#frag",
			body: `<a href="http://example.com/dir/page.html">me</a>`,
			want: nil,
		},
		{
			name: "image-only anchor then text anchor wins",
			body: `<a href="/x"><img src="i.png" alt="alt text"></a><a href="/x">  </a><a href="/x">Real <b>text</b></a><a href="/x">later</a>`,
			want: []Link{{"http://example.com/x", "Real text"}},
		},
		{
			name: "image-only everywhere gives empty anchor",
			body: `<a href="/x"><img src="i.png"></a>`,
			want: []Link{{"http://example.com/x", ""}},
		},
		{
			name: "anchor text skips script",
			body: `<a href="/x"><script>s()</script>go</a>`,
			want: []Link{{"http://example.com/x", "go"}},
		},
		{
			name: "non-http and missing href skipped",
			body: `<a>none</a><a href="javascript:x()">j</a><a href="mailto:a@b.c">m</a><a href="data:,x">d</a><a href=" /ok ">ok</a>`,
			want: []Link{{"http://example.com/ok", "ok"}},
		},
		{
			name: "relative base href",
			body: `<head><base href="../other/"></head><a href="x.html">x</a>`,
			want: []Link{{"http://example.com/other/x.html", "x"}},
		},
		{
			name: "absolute base href",
			body: `<base href="https://CDN.example.org:443/b/"><a href="x">x</a><a href="/y">y</a>`,
			want: []Link{{"https://cdn.example.org/b/x", "x"}, {"https://cdn.example.org/y", "y"}},
		},
		{
			name: "multiple bases: first wins",
			body: `<base href="/first/"><base href="/second/"><a href="x">x</a>`,
			want: []Link{{"http://example.com/first/x", "x"}},
		},
		{
			name: "base without href ignored",
			body: `<base target="_blank"><base href="/b/"><a href="x">x</a>`,
			want: []Link{{"http://example.com/b/x", "x"}},
		},
		{
			name: "non-http base ignored",
			body: `<base href="javascript:alert(1)"><a href="x">x</a>`,
			want: []Link{{"http://example.com/dir/x", "x"}},
		},
		{
			name: "self removal uses page URL, not base",
			body: `<base href="http://elsewhere.com/"><a href="">base itself</a><a href="http://example.com/dir/page.html">self</a>`,
			want: []Link{{"http://elsewhere.com/", "base itself"}},
		},
		{
			name: "unclosed anchors",
			body: `<p><a href="/a">one<p><a href="/b">two`,
			want: []Link{{"http://example.com/a", "one"}, {"http://example.com/b", "two"}},
		},
		{
			name: "duplicate href attribute: first wins",
			body: `<a href="/first" href="/second">x</a>`,
			want: []Link{{"http://example.com/first", "x"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			page := tc.page
			if page == "" {
				page = testPage
			}
			got := mustParse(t, page, tc.body).Links
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Links =\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

// Contract: the page URL is normalized first and must be http(s).
func TestParsePageURL(t *testing.T) {
	p := mustParse(t, "HTTPS://Example.COM:443#x", "<p>x</p>")
	if p.URL != "https://example.com/" {
		t.Errorf("URL = %q, want https://example.com/", p.URL)
	}
	for _, bad := range []string{"", "/rel", "ftp://example.com/", "mailto:a@b.c"} {
		if _, err := Parse(bad, strings.NewReader("<p>x</p>"), 100); !errors.Is(err, ErrBadURL) {
			t.Errorf("Parse(%q) error = %v, want ErrBadURL", bad, err)
		}
	}
}

// Contract: body larger than maxBytes -> ErrTooLarge.
func TestParseTooLarge(t *testing.T) {
	body := "<p>" + strings.Repeat("a", 100) + "</p>" // 107 bytes
	if _, err := Parse(testPage, strings.NewReader(body), int64(len(body))); err != nil {
		t.Errorf("body of exactly maxBytes: %v", err)
	}
	_, err := Parse(testPage, strings.NewReader(body), int64(len(body)-1))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error = %v, want ErrTooLarge", err)
	}
	if !strings.Contains(err.Error(), "106") || !strings.Contains(err.Error(), testPage) {
		t.Errorf("error %q should name the limit and the page", err)
	}
	if _, err := Parse(testPage, strings.NewReader(body), 0); err == nil {
		t.Error("maxBytes 0 accepted")
	}
}

// Contract: binary/non-HTML content -> ErrNotHTML.
func TestParseNotHTML(t *testing.T) {
	random := make([]byte, 2048)
	for i := range random {
		random[i] = byte(0x80 + i%0x40) // continuation bytes: all invalid
	}
	tests := []struct {
		name string
		body []byte
		bad  bool
	}{
		{"NUL in first KB", []byte("<html>\x00<p>x</p>"), true},
		{"PNG header", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), true},
		{"invalid UTF-8 heavy", random, true},
		{"NUL after first KB is tolerated", append([]byte("<p>"+strings.Repeat("a", 1100)), 0), false},
		{"a few Latin-1 bytes are tolerated", []byte("<p>caf\xe9 na\xefve</p>" + strings.Repeat(" ", 100)), false},
		{"valid UTF-8 multibyte", []byte("<p>" + strings.Repeat("日本語", 400) + "</p>"), false},
		{"empty body", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(testPage, bytes.NewReader(tc.body), 1<<20)
			if tc.bad && !errors.Is(err, ErrNotHTML) {
				t.Errorf("error = %v, want ErrNotHTML", err)
			}
			if !tc.bad && err != nil {
				t.Errorf("error = %v, want nil", err)
			}
		})
	}
}

// A multibyte rune cut by the 1024-byte sniff window must not count as
// invalid UTF-8, but a truncated rune at the real end of the body does.
func TestCountInvalid(t *testing.T) {
	// "a" then 2-byte runes: byte 1023 starts a rune whose second byte is
	// byte 1024, just outside the window.
	body := append([]byte("a"), strings.Repeat("é", 1000)...)
	if n := countInvalid(body[:sniffLen], true); n != 0 {
		t.Errorf("cut window: %d invalid bytes, want 0", n)
	}
	if n := countInvalid(body[:sniffLen], false); n != 1 {
		t.Errorf("truncated body end: %d invalid bytes, want 1", n)
	}
	if n := countInvalid([]byte("a\xffb\xfe\xc3"), false); n != 3 {
		t.Errorf("mixed: %d invalid bytes, want 3", n)
	}
}

// x/net/html refuses more than 512 open elements; Parse reports it as an
// error (not a panic, not ErrNotHTML), while 500 unclosed tags still parse.
func TestParseDeepNesting(t *testing.T) {
	if p := mustParse(t, testPage, strings.Repeat("<div>", 500)+"deep"); p.Text != "deep" {
		t.Errorf("Text = %q, want deep", p.Text)
	}
	_, err := Parse(testPage, strings.NewReader(strings.Repeat("<div>", 600)), 1<<20)
	if err == nil || errors.Is(err, ErrNotHTML) || !strings.Contains(err.Error(), testPage) {
		t.Errorf("error = %v, want a parse error naming the page", err)
	}
}

// Read errors are reported, not swallowed.
func TestParseReadError(t *testing.T) {
	_, err := Parse(testPage, iotest.ErrReader(errors.New("boom")), 100)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("error = %v, want read error", err)
	}
}

// Contract: identical non-empty text -> same hash (hex sha256); "" for empty.
func TestTextHash(t *testing.T) {
	if got := TextHash(""); got != "" {
		t.Errorf("TextHash(\"\") = %q, want empty", got)
	}
	sum := sha256.Sum256([]byte("abc"))
	if got, want := TextHash("abc"), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("TextHash(abc) = %q, want %q", got, want)
	}
	// Two pages whose markup differs but whose text is identical cluster.
	a := mustParse(t, "http://a.com/", "<title>T</title><p>same   text</p>")
	b := mustParse(t, "http://b.com/x", "<html><head><title>T</title></head><body><div>same\ntext<script>x</script></div>")
	if TextHash(a.Text) != TextHash(b.Text) {
		t.Errorf("texts %q and %q should hash equal", a.Text, b.Text)
	}
	if TextHash("same text") == TextHash("same text.") {
		t.Error("different texts hash equal")
	}
}

// Contract: every distinct non-empty anchor of a link is kept, the first
// in Links, the others in MoreAnchors in document order.
func TestMoreAnchors(t *testing.T) {
	p := mustParse(t, testPage, `<a href="a.html"><img src=x></a><a href="a.html">Install</a><a href="b.html">B</a>`+
		`<a href="a.html">Download</a><a href="a.html">Install</a><a href="b.html"></a><a href="a.html">Get started</a>`)
	wantLinks := []Link{{Target: "http://example.com/dir/a.html", Anchor: "Install"}, {Target: "http://example.com/dir/b.html", Anchor: "B"}}
	wantMore := []Link{{Target: "http://example.com/dir/a.html", Anchor: "Download"}, {Target: "http://example.com/dir/a.html", Anchor: "Get started"}}
	if !slices.Equal(p.Links, wantLinks) || !slices.Equal(p.MoreAnchors, wantMore) {
		t.Errorf("Links = %q, MoreAnchors = %q; want %q, %q", p.Links, p.MoreAnchors, wantLinks, wantMore)
	}
}
