package extract

import (
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
