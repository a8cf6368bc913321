package sample

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// Options configure New. Zero values select the defaults.
type Options struct {
	// Pages is the number of pages initially loaded, duplicates included.
	Pages int
	// Seed selects the corpus: equal Options give byte-identical corpora.
	Seed int64
	// Hosts is the number of sites pages are spread over. Default 4.
	Hosts int
	// DupFraction is the share of pages that are exact duplicates (same
	// text, other URL) of another page: mirrors, and index.html aliases of
	// directory pages. Default 0.05; negative for none.
	DupFraction float64
	// NearDupFraction is the share of pages that are near-duplicates of
	// another page (one word differs). Default 0.02; negative for none.
	NearDupFraction float64
	// BaseURL selects the directory layout when not empty; see the package
	// documentation. It must be an absolute http(s) URL without query or
	// fragment, e.g. "http://site.example/".
	BaseURL string
}

// Corpus is a generated set of pages, and the state it reaches after each
// Step: which pages are loaded and what their HTML is. It is not safe for
// concurrent use.
type Corpus struct {
	opts  Options
	base  string // normalized BaseURL without trailing slash; "" = host layout
	docs  []*doc // every page ever generated, loaded or not
	byURL map[string]*doc
	// orig is the number of original pages: docs[:orig]. The rest are
	// duplicates, drafts and pages added by Steps.
	orig int
	// nextNew is the number of the next page a Step adds. Links point to
	// the first newPool such pages before they exist.
	nextNew int
	newPool int
}

// doc is one page: its URL, current content and whether it is loaded.
type doc struct {
	url  string
	base string // the URL the HTML is written for (relative links)
	site int
	c    *content
	live bool
}

// Doc is one page as a loader receives it.
type Doc struct {
	// URL is the page's URL, already normalized (extract.Normalize(URL)
	// returns URL).
	URL string
	// HTML is the page's body.
	HTML []byte
}

// Generate returns a corpus of n pages in the host layout with default
// options: New(Options{Pages: n, Seed: seed}).
func Generate(seed int64, n int) *Corpus {
	c, err := New(Options{Pages: n, Seed: seed})
	if err != nil {
		panic(err) // cannot happen: the options are valid
	}
	return c
}

// New generates a corpus as opts describe.
func New(opts Options) (*Corpus, error) {
	if opts.Pages < 0 {
		return nil, errors.New("sample: negative Pages")
	}
	if opts.Hosts == 0 {
		opts.Hosts = 4
	}
	if opts.Hosts < 0 {
		return nil, errors.New("sample: negative Hosts")
	}
	opts.DupFraction = fraction(opts.DupFraction, 0.05)
	opts.NearDupFraction = fraction(opts.NearDupFraction, 0.02)
	if opts.DupFraction+opts.NearDupFraction > 0.5 {
		return nil, errors.New("sample: DupFraction+NearDupFraction exceeds 0.5")
	}
	c := &Corpus{opts: opts, byURL: map[string]*doc{}, newPool: max(20, opts.Pages/5)}
	if opts.BaseURL != "" {
		if strings.ContainsAny(opts.BaseURL, "?#") {
			return nil, fmt.Errorf("sample: BaseURL %q has a query or fragment", opts.BaseURL)
		}
		b, err := extract.Normalize(opts.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("sample: BaseURL: %w", err)
		}
		c.base = strings.TrimSuffix(b, "/")
	}
	g := newGenerator(c, rand.New(rand.NewPCG(uint64(opts.Seed), 0x5a3b1e)))
	g.generate()
	return c, nil
}

func fraction(f, def float64) float64 {
	switch {
	case f == 0:
		return def
	case f < 0:
		return 0
	}
	return f
}

// add registers a new page, not yet loaded.
func (c *Corpus) add(url string, site int) *doc {
	d := &doc{url: url, base: url, site: site}
	c.docs = append(c.docs, d)
	c.byURL[url] = d
	return d
}

// BaseURL returns the normalized base URL of the directory layout (with a
// trailing slash, as the loader's --base-url expects), or "" for the host
// layout.
func (c *Corpus) BaseURL() string {
	if c.base == "" {
		return ""
	}
	return c.base + "/"
}

// Len returns the number of loaded pages.
func (c *Corpus) Len() int {
	n := 0
	for _, d := range c.docs {
		if d.live {
			n++
		}
	}
	return n
}

// URLs returns the URLs of the loaded pages, sorted.
func (c *Corpus) URLs() []string {
	var urls []string
	for _, d := range c.docs {
		if d.live {
			urls = append(urls, d.url)
		}
	}
	slices.Sort(urls)
	return urls
}

// HTML returns the body of the loaded page url, or false if it is not
// loaded.
func (c *Corpus) HTML(url string) ([]byte, bool) {
	d := c.byURL[url]
	if d == nil || !d.live {
		return nil, false
	}
	return render(d), true
}

// All yields the loaded pages in URL order. Bodies are rendered as they are
// yielded, so a large corpus is never held in memory as HTML.
func (c *Corpus) All() iter.Seq[Doc] {
	return func(yield func(Doc) bool) {
		for _, u := range c.URLs() {
			if !yield(Doc{URL: u, HTML: render(c.byURL[u])}) {
				return
			}
		}
	}
}

// MaxBody is an upper bound on the size of any generated body, usable as
// extract.Parse's maxBytes.
const MaxBody = 1 << 20

// Pages parses every loaded page with extract.Parse, keyed by URL: the
// input batch.Compute expects.
func (c *Corpus) Pages() (map[string]*extract.Page, error) {
	pages := map[string]*extract.Page{}
	for d := range c.All() {
		p, err := extract.Parse(d.URL, bytes.NewReader(d.HTML), MaxBody)
		if err != nil {
			return nil, err
		}
		if p.URL != d.URL {
			return nil, fmt.Errorf("sample: %s normalizes to %s", d.URL, p.URL)
		}
		pages[p.URL] = p
	}
	return pages, nil
}

// counts returns how many exact and near duplicates to generate among n
// pages.
func (o *Options) counts() (dups, near int) {
	dups = int(math.Round(float64(o.Pages) * o.DupFraction))
	near = int(math.Round(float64(o.Pages) * o.NearDupFraction))
	return dups, near
}
