package sample

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// sectionSize is how many pages of a site share a section directory; the
// second page of each section is the section's index page.
const sectionSize = 40

// content is what a page says: everything its HTML is rendered from.
// Contents are never modified once a page uses them (edits make a new one),
// so pages sharing a *content are exact duplicates.
type content struct {
	title []int32
	paras [][]int32
	links []link
	// stub pages (redirect stubs) have no text at all: no title, no
	// paragraphs and only image links.
	stub          bool
	script, style bool
	deco          uint8 // decorations: decoAmp | decoNbsp | decoCafe
}

const (
	decoAmp  = 1 << iota // an "&amp;" between two words
	decoNbsp             // a "&nbsp;" instead of a space
	decoCafe             // the non-ASCII word "café"
)

// link is one <a> of a page.
type link struct {
	target string // normalized absolute URL
	anchor string // "" for an image-only link
	form   form
	frag   bool
}

// form is how an href is spelled; all spellings resolve to the same target.
type form uint8

const (
	formAbs   form = iota // http://site0.example/a/b.html
	formUpper             // HTTP://SITE0.EXAMPLE:80/a/b.html
	formRoot              // /a/b.html (same origin only)
	formRel               // ../a/b.html (same origin only)
)

// generic anchor texts, shared by many links to different targets.
var genericAnchors = []string{"home", "read more", "click here", "next", "more", "link", "details"}

// generator holds the random state of one generation or Step.
type generator struct {
	c     *Corpus
	r     *rand.Rand
	words wordSource
	zipf  *rand.Zipf // hub popularity over original pages
}

func newGenerator(c *Corpus, r *rand.Rand) *generator {
	return &generator{c: c, r: r, words: newWordSource(r)}
}

// siteRoot returns the URL prefix of site h (or of its mirror), without a
// trailing slash.
func (c *Corpus) siteRoot(h int, mirror bool) string {
	name := "site"
	if mirror {
		name = "mirror"
	}
	if c.base != "" {
		return fmt.Sprintf("%s/%s%d", c.base, name, h)
	}
	return fmt.Sprintf("http://%s%d.example", name, h)
}

// indexURL returns the URL of a directory's index page: dir itself in the
// host layout, dir + "index.html" in the directory layout (where every
// page must be a file).
func (c *Corpus) indexURL(dir string) string {
	if c.base != "" {
		return dir + "index.html"
	}
	return dir
}

// originalURL returns the URL of original page i: the sites' home pages
// come first, then pages spread over the sites' sections.
func (g *generator) originalURL(i int) string {
	h, k := i%g.c.opts.Hosts, i/g.c.opts.Hosts
	root := g.c.siteRoot(h, false)
	sec := fmt.Sprintf("%s/s%d/", root, k/sectionSize)
	switch {
	case k == 0:
		return g.c.indexURL(root + "/")
	case k%sectionSize == 1:
		return g.c.indexURL(sec)
	}
	return fmt.Sprintf("%s%s-%d.html", sec, words[g.r.IntN(300)], k)
}

// alias returns a page to duplicate and the other URL serving it: a third
// of the time the index page of a random page's directory and its alias
// (index.html for a directory in the host layout, index.htm for
// index.html in the directory layout), otherwise a random page on its
// site's mirror.
func (g *generator) alias() (src *doc, url string) {
	c := g.c
	src = c.docs[g.r.IntN(c.orig)]
	if g.r.IntN(3) == 0 {
		if idx := c.byURL[c.indexURL(src.url[:strings.LastIndexByte(src.url, '/')+1])]; idx != nil {
			if c.base == "" {
				return idx, idx.url + "index.html"
			}
			return idx, strings.TrimSuffix(idx.url, "l")
		}
	}
	root := c.siteRoot(src.site, false)
	return src, c.siteRoot(src.site, true) + strings.TrimPrefix(src.url, root)
}

// generate creates the initial corpus.
func (g *generator) generate() {
	c, n := g.c, g.c.opts.Pages
	dups, near := c.opts.counts()
	c.orig = n - dups - near
	if c.orig <= 0 {
		c.orig = 0
		return
	}
	g.zipf = rand.NewZipf(g.r, 1.2, 1, uint64(c.orig-1))
	for i := range c.orig {
		c.add(g.originalURL(i), i%c.opts.Hosts)
	}
	// Exact duplicates: another URL for an original page.
	var aliases [][2]*doc
	for tries := 0; len(aliases) < dups && tries < 10*dups; tries++ {
		src, u := g.alias()
		if c.byURL[u] == nil {
			aliases = append(aliases, [2]*doc{src, c.add(u, src.site)})
		}
	}
	// Near-duplicates: a draft copy of an original with one word changed.
	var drafts [][2]*doc
	for j := range near {
		src := c.docs[g.r.IntN(c.orig)]
		u := fmt.Sprintf("%s/draft/d%d.html", c.siteRoot(src.site, false), j)
		drafts = append(drafts, [2]*doc{src, c.add(u, src.site)})
	}
	for _, d := range c.docs[:c.orig] {
		d.c = g.content(d)
	}
	for _, a := range aliases {
		a[1].c, a[1].base = a[0].c, a[0].base
	}
	for _, dr := range drafts {
		src := dr[0]
		for tries := 0; src.c.stub && tries < 20; tries++ {
			src = c.docs[g.r.IntN(c.orig)] // a stub has no word to change
		}
		dr[1].c = g.editWords(src.c, 1)
	}
	for _, d := range c.docs {
		d.live = true
	}
}

// content generates what page d says.
func (g *generator) content(d *doc) *content {
	r := g.r
	c := &content{script: r.IntN(5) == 0, style: r.IntN(10) == 0, deco: uint8(r.IntN(8))}
	nlinks := 10 + r.IntN(21)
	if g.c.orig > 20 && r.IntN(100) == 0 {
		c.stub = true
		nlinks = 1 + r.IntN(3)
	} else {
		c.title = g.phrase(2 + r.IntN(4))
		c.paras = make([][]int32, 2+r.IntN(4))
		for i := range c.paras {
			c.paras[i] = g.phrase(10 + r.IntN(31))
		}
	}
	for range nlinks {
		c.links = append(c.links, g.link(d, c.stub))
	}
	return c
}

// phrase returns n random word ranks.
func (g *generator) phrase(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = g.words.next()
	}
	return p
}

// link generates one outlink of page d.
func (g *generator) link(d *doc, imageOnly bool) link {
	r := g.r
	l := link{target: g.target(d), form: form(r.IntN(4)), frag: r.IntN(10) == 0}
	switch x := r.IntN(100); {
	case imageOnly || x < 12:
		// image-only: no anchor text
	case x < 35:
		l.anchor = genericAnchors[r.IntN(len(genericAnchors))]
	default:
		ws := g.phrase(1 + r.IntN(3))
		var b strings.Builder
		for i, w := range ws {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[w])
		}
		l.anchor = b.String()
	}
	return l
}

// target picks the URL a link of page d points to.
func (g *generator) target(d *doc) string {
	c, r := g.c, g.r
	h := d.site
	switch x := r.IntN(100); {
	case x < 35: // popular pages, Zipf-distributed: the hubs
		return c.docs[g.zipf.Uint64()].url
	case x < 50: // navigation: the page's directory index, or the home
		home := c.indexURL(c.siteRoot(h, false) + "/")
		sec := c.indexURL(d.url[:strings.LastIndexByte(d.url, '/')+1])
		if r.IntN(2) == 0 && sec != d.url && c.byURL[sec] != nil {
			return sec
		}
		return home
	case x < 75: // another page of the same site
		perSite := (c.orig - h + c.opts.Hosts - 1) / c.opts.Hosts
		if perSite < 1 {
			return c.docs[r.IntN(c.orig)].url
		}
		return c.docs[h+c.opts.Hosts*r.IntN(perSite)].url
	case x < 85: // any page, duplicates included
		return c.docs[r.IntN(len(c.docs))].url
	case x < 89:
		return d.url // a self link, which extraction drops
	case x < 93: // dangling: a page that never exists
		return fmt.Sprintf("%s/missing/%s-%d.html", c.siteRoot(h, false), words[r.IntN(1000)], r.IntN(1000))
	case x < 96: // dangling: another web site
		return fmt.Sprintf("http://ext%d.example/%s", r.IntN(50), words[r.IntN(1000)])
	}
	// dangling until a Step adds it
	return c.newURL(r.IntN(c.newPool))
}

// newURL returns the URL of the j-th page of the pool of pages Steps add.
func (c *Corpus) newURL(j int) string {
	return fmt.Sprintf("%s/new/p%d.html", c.siteRoot(j%c.opts.Hosts, false), j)
}

// editWords returns a copy of c with n body words replaced by different
// ones, so that its text differs from c's. A stub gains a title and a
// paragraph instead.
func (g *generator) editWords(c *content, n int) *content {
	e := *c
	e.paras = make([][]int32, len(c.paras))
	for i, p := range c.paras {
		e.paras[i] = append([]int32(nil), p...)
	}
	if e.stub || len(e.paras) == 0 {
		e.stub = false
		e.title = g.phrase(3)
		e.paras = append(e.paras, g.phrase(10+n))
		return &e
	}
	for range n {
		p := e.paras[g.r.IntN(len(e.paras))]
		i := g.r.IntN(len(p))
		w := g.words.next()
		if w == p[i] {
			w = (w + 1) % VocabularySize
		}
		p[i] = w
	}
	return &e
}
