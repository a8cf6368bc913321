package sample_test

import (
	"fmt"
	"os"

	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
)

// A corpus, one recrawl step as loader input, and the reference index of
// the stepped corpus.
func Example() {
	c := sample.Generate(1, 300)
	fmt.Println(c.Len(), "pages, for example", c.URLs()[0])

	changes := c.Step(1, 0.05)
	last := changes[len(changes)-1]
	fmt.Println(len(changes), "changes, the last:", last.Op, last.URL)
	// As the loader's --jsonl input:
	if err := sample.WriteChanges(os.Stdout, changes[len(changes)-1:]); err != nil {
		fmt.Println(err)
	}

	pages, err := c.Pages()
	if err != nil {
		fmt.Println(err)
		return
	}
	ix := batch.Compute(pages)
	for _, r := range ix.Top(2) {
		fmt.Println(r.URL, r.InboundCount)
	}
	// Output:
	// 300 pages, for example http://mirror0.example/s1/juti-43.html
	// 23 changes, the last: delete http://site1.example/s0/losa-24.html
	// {"url":"http://site1.example/s0/losa-24.html","delete":true}
	// http://site0.example/ 251
	// http://site1.example/ 168
}
