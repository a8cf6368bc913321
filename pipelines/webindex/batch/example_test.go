package batch_test

import (
	"fmt"
	"strings"

	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

func ExampleCompute() {
	about := `<title>About</title><p>Gophers live here.</p><a href="/">home</a>`
	docs := map[string]string{
		"http://example.com/": `<title>Home</title><p>Welcome to the gopher zoo.</p>
			<a href="/about">About us</a> <a href="http://mirror.example/about">mirror</a>`,
		"http://example.com/about":    about,
		"http://mirror.example/about": about, // an exact duplicate
	}
	pages := map[string]*extract.Page{}
	for u, body := range docs {
		p, err := extract.Parse(u, strings.NewReader(body), 1<<20)
		if err != nil {
			fmt.Println(err)
			return
		}
		pages[p.URL] = p
	}
	ix := batch.Compute(pages)

	p, _ := ix.Page("http://mirror.example/about")
	fmt.Println(p.Canonical, p.Duplicates, p.Rank, p.InboundCount)
	for _, l := range p.Inlinks {
		fmt.Printf("%s -> %s %q\n", l.Source, l.Target, l.Anchor)
	}
	total, results := ix.Search("GOPHERS", 10)
	fmt.Println(total, results)
	fmt.Println(ix.Top(5))
	// Output:
	// http://example.com/about [http://example.com/about] 1 1
	// http://example.com/ -> http://example.com/about "About us"
	// http://example.com/ -> http://mirror.example/about "mirror"
	// 1 [{http://example.com/about About 1 29 0.7927619293358844}]
	// [{http://example.com/ Home 1 47 0} {http://example.com/about About 1 29 0}]
}
