package indextest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// Corpus is the test's model of what is loaded: URL → HTML.
type Corpus struct {
	Rand  *rand.Rand
	Pages map[string]string
	URLs  []string // every URL the corpus may use, loaded or not
}

// Vocab is the words the corpus makes texts of.
var Vocab = strings.Fields("apple banana cherry date elder fig grape honeydew kiwi lemon mango nectarine olive papaya quince")

// NewCorpus makes a corpus of n URLs, seeded.
func NewCorpus(seed uint64, n int) *Corpus {
	c := &Corpus{Rand: rand.New(rand.NewPCG(seed, 7)), Pages: map[string]string{}}
	for i := range n {
		c.URLs = append(c.URLs, fmt.Sprintf("http://h%d.example/p%d", i%7, i))
	}
	return c
}

// HTML makes a page for u. Texts come from a small pool so that exact
// duplicates are common; near-duplicates differ in one word. Links go to
// loaded pages, to URLs never loaded (dangling), to u itself, and to
// several members of one cluster; anchors come from a small pool so that
// duplicates may link differently yet share their text.
func (c *Corpus) HTML(u string) string {
	r := c.Rand
	var b strings.Builder
	switch k := r.IntN(10); {
	case k == 0: // no text at all: a cluster of its own
		fmt.Fprintf(&b, `<a href="%s"><img src="x.png"></a>`, c.URLs[r.IntN(len(c.URLs))])
		return b.String()
	case k < 6: // one of a few shared texts: exact duplicates
		fmt.Fprintf(&b, "<title>T%d</title><p>%s %s</p>", k, Vocab[k], Vocab[k+1])
	default: // a near-duplicate or a unique text
		title := fmt.Sprintf("T%d", k)
		if k == 9 { // longer than a result title: cut inside a character
			title = "x" + strings.Repeat("ü", schema.MaxTitleBytes/2+3)
		}
		// Some texts hold an identifier (a compound term).
		fmt.Fprintf(&b, "<title>%s</title><p>%s %s %s %s</p>", title, Vocab[k], Vocab[r.IntN(len(Vocab))], Vocab[r.IntN(3)],
			[]string{"", "apple_pie", "kiwi.lemon", "fig::grape"}[r.IntN(4)])
	}
	b.WriteString(`<script>var hidden = "kiwi";</script>`)
	for range r.IntN(6) {
		target := c.URLs[r.IntN(len(c.URLs))]
		switch r.IntN(8) {
		case 0:
			target = u // self link: never counted
		case 1:
			target = fmt.Sprintf("http://dangling.example/%d", r.IntN(20))
		case 2:
			target = strings.Replace(target, "http://", "HTTP://", 1) + "#frag" // normalizes to target
		}
		// Anchors: none, a few shared words (a navigation bar's), or
		// words of the texts, so that anchor text matches and scores.
		anchor := []string{"", "link", "more", "apple guide", Vocab[r.IntN(len(Vocab))], "apple_pie recipe"}[r.IntN(6)]
		fmt.Fprintf(&b, `<a href="%s">%s</a>`, target, anchor)
	}
	return b.String()
}

func (c *Corpus) Apply(changes map[string]string) {
	for u, h := range changes {
		if h == "" {
			delete(c.Pages, u)
		} else {
			c.Pages[u] = h
		}
	}
}

// Expected computes the index of the corpus from scratch.
func (c *Corpus) Expected(t *testing.T) *batch.Index {
	pages := map[string]*extract.Page{}
	for u, h := range c.Pages {
		p, err := extract.Parse(u, strings.NewReader(h), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		pages[p.URL] = p
	}
	return batch.Compute(pages)
}
