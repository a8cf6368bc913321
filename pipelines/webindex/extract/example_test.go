package extract_test

import (
	"fmt"
	"strings"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

func ExampleParse() {
	body := `<html><head><title>Go  Links</title><base href="/docs/"></head>
<body>
  <p>Read the <a href="intro.html#start">intro</a> first.</p>
  <a href="HTTPS://Go.dev:443"><img src="logo.png"></a>
  <a href="https://go.dev/">Go home</a>
  <a href="#top">back to top</a> <!-- resolves against <base>, not the page -->
  <script>track()</script>
</body></html>`
	p, err := extract.Parse("http://Example.com:80/docs/index.html", strings.NewReader(body), 1<<20)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.URL)
	fmt.Printf("%q\n", p.Title)
	fmt.Printf("%q\n", p.Text)
	for _, l := range p.Links {
		fmt.Printf("%s %q\n", l.Target, l.Anchor)
	}
	fmt.Println(extract.Terms(p.Title))
	// Output:
	// http://example.com/docs/index.html
	// "Go Links"
	// "Go Links Read the intro first. Go home back to top"
	// http://example.com/docs/intro.html "intro"
	// https://go.dev/ "Go home"
	// http://example.com/docs/ "back to top"
	// [go links]
}

func ExampleNormalize() {
	for _, s := range []string{
		"HTTP://Example.com:80/cpp/operator%3d.html#top", // escaped "=" is "="
		"http://example.com/cpp/operator().html?",        // an empty query is kept
		"http://example.com/a b/%c3%a9/x%2Fy",            // %2F stays escaped
		"http://example.com/s?q=%7e+%2B&r=a b",           // reserved query bytes stay as written
		"http://example.com/100%",                        // a stray "%" in a path is an error
	} {
		n, err := extract.Normalize(s)
		fmt.Println(n, err)
	}
	// Output:
	// http://example.com/cpp/operator=.html <nil>
	// http://example.com/cpp/operator().html? <nil>
	// http://example.com/a%20b/%C3%A9/x%2Fy <nil>
	// http://example.com/s?q=~+%2B&r=a%20b <nil>
	//  extract: unsupported URL: "http://example.com/100%": parse "http://example.com/100%": invalid URL escape "%"
}
