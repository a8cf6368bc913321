package sample

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// dump concatenates every loaded page and its body.
func dump(c *Corpus) []byte {
	var b bytes.Buffer
	for d := range c.All() {
		b.WriteString(d.URL + "\n")
		b.Write(d.HTML)
	}
	return b.Bytes()
}

func dumpChanges(changes []Change) []byte {
	var b bytes.Buffer
	if err := WriteChanges(&b, changes); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestDeterministic(t *testing.T) {
	a, b := Generate(42, 300), Generate(42, 300)
	if !bytes.Equal(dump(a), dump(b)) {
		t.Fatal("same seed, different corpora")
	}
	for i := range 3 {
		ca, cb := a.Step(int64(i), 0.1), b.Step(int64(i), 0.1)
		if len(ca) == 0 || !bytes.Equal(dumpChanges(ca), dumpChanges(cb)) {
			t.Fatalf("step %d: %d and %d changes differ", i, len(ca), len(cb))
		}
		if !bytes.Equal(dump(a), dump(b)) {
			t.Fatalf("step %d: corpora differ", i)
		}
	}
	if bytes.Equal(dump(Generate(43, 300)), dump(Generate(42, 300))) {
		t.Error("different seeds, same corpus")
	}
	if n := Generate(1, 300).Len(); n != 300 {
		t.Errorf("Len = %d, want 300", n)
	}
}

func TestSmallCorpora(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 5, 20} {
		c := Generate(1, n)
		if c.Len() != n {
			t.Errorf("Generate(1, %d).Len() = %d", n, c.Len())
		}
		c.Step(1, 0.5)
		if _, err := c.Pages(); err != nil {
			t.Errorf("n=%d: %v", n, err)
		}
	}
}

// expected returns what extract.Parse must find in page d, from the model:
// distinct targets in order, self links dropped, the first non-empty anchor.
func expected(d *doc) (title string, links []extract.Link) {
	var ws []string
	for _, w := range d.c.title {
		ws = append(ws, capitalize(words[w]))
	}
	index := map[string]int{}
	for _, l := range d.c.links {
		if l.target == d.url {
			continue
		}
		i, ok := index[l.target]
		if !ok {
			i = len(links)
			index[l.target] = i
			links = append(links, extract.Link{Target: l.target})
		}
		if links[i].Anchor == "" {
			links[i].Anchor = l.anchor
		}
	}
	return strings.Join(ws, " "), links
}

// TestParse checks every page of both layouts parses, and that what the
// parser finds is what the generator meant: every href spelling resolves to
// its intended target.
func TestParse(t *testing.T) {
	host := Generate(7, 600)
	dir, err := New(Options{Pages: 300, Seed: 7, BaseURL: "HTTP://Site.Example:80/corpus/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := dir.BaseURL(); got != "http://site.example/corpus/" {
		t.Errorf("BaseURL = %q", got)
	}
	for _, c := range []*Corpus{host, dir} {
		c.Step(1, 0.1)
		checked, selfLinks := 0, 0
		for _, d := range c.docs {
			if !d.live {
				continue
			}
			p, err := extract.Parse(d.url, bytes.NewReader(render(d)), MaxBody)
			if err != nil {
				t.Fatal(err)
			}
			if p.URL != d.url {
				t.Errorf("%s normalizes to %s", d.url, p.URL)
			}
			for _, l := range d.c.links {
				if l.target == d.url {
					selfLinks++
				}
			}
			if d.base != d.url {
				continue // rendered for another URL: targets differ
			}
			checked++
			title, links := expected(d)
			if p.Title != title || !slices.Equal(p.Links, links) {
				t.Fatalf("%s: parsed\n%q %v\nwant\n%q %v\nHTML:\n%s", d.url, p.Title, p.Links, title, links, render(d))
			}
		}
		if checked < c.Len()*9/10 || selfLinks == 0 {
			t.Errorf("checked %d of %d pages, %d self links", checked, c.Len(), selfLinks)
		}
	}
}

func TestHrefSpellings(t *testing.T) {
	all := dump(Generate(3, 500))
	for _, s := range []string{`href="HTTP://SITE`, `.EXAMPLE:80/`, `href="../`, `href="/`, `#s`, `href="http://ext`, `<img src=`, "<script>", "<style>", "&amp;", "&nbsp;", "Café"} {
		if !bytes.Contains(all, []byte(s)) {
			t.Errorf("no page contains %q", s)
		}
	}
}

func TestWords(t *testing.T) {
	seen := map[string]bool{}
	for r := range VocabularySize {
		w := Word(r)
		if seen[w] || len(w) < 4 || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") != "" {
			t.Fatalf("Word(%d) = %q: duplicate or malformed", r, w)
		}
		seen[w] = true
	}
	if seen[ScriptWord] || seen[StyleWord] {
		t.Error("ScriptWord or StyleWord is in the vocabulary")
	}
}

// stats indexes a corpus with batch.
func index(t *testing.T, c *Corpus) (map[string]*extract.Page, *batch.Index) {
	t.Helper()
	pages, err := c.Pages()
	if err != nil {
		t.Fatal(err)
	}
	return pages, batch.Compute(pages)
}

func TestStructure(t *testing.T) {
	const n = 1200
	c := Generate(11, n)
	pages, ix := index(t, c)

	var ranks []int64
	var links, imageLinks, dangling, newTargets, inClusters, empty, scripts int
	for _, u := range ix.URLs() {
		p, _ := ix.Page(u)
		ranks = append(ranks, p.Rank)
		if len(p.Duplicates) > 0 {
			inClusters++
		}
		src := pages[u]
		if src.Text == "" {
			empty++
			if len(p.Duplicates) > 0 {
				t.Errorf("empty page %s has duplicates %v", u, p.Duplicates)
			}
		}
		links += len(src.Links)
		for _, l := range src.Links {
			if l.Anchor == "" {
				imageLinks++
			}
			if pages[l.Target] == nil {
				dangling++
				if strings.Contains(l.Target, "/new/") {
					newTargets++
				}
			}
		}
		if html, _ := c.HTML(u); bytes.Contains(html, []byte(ScriptWord)) {
			scripts++
		}
	}
	slices.Sort(ranks)
	t.Logf("ranks: top %v, median %d; %d in clusters, %d empty, links %d (%d image, %d dangling)",
		ranks[n-5:], ranks[n/2], inClusters, empty, links, imageLinks, dangling)
	if top, median := ranks[n-1], ranks[n/2]; top < n/4 || median > 15 {
		t.Errorf("in-degree not skewed: top %d, median %d", top, median)
	}
	var topShare int64
	for _, r := range ranks[n-n/100:] {
		topShare += r
	}
	if total := sumLinks(pages); topShare*5 < int64(total) {
		t.Errorf("top 1%% of pages have %d of %d links; want at least a fifth", topShare, total)
	}
	if avg := links / n; avg < 8 || avg > 30 {
		t.Errorf("average outlinks %d", avg)
	}
	if inClusters < n/20 || empty == 0 || imageLinks == 0 || dangling == 0 || newTargets == 0 || scripts == 0 {
		t.Errorf("missing structure: %d in clusters, %d empty, %d image links, %d dangling (%d new), %d scripts",
			inClusters, empty, imageLinks, dangling, newTargets, scripts)
	}

	// Near-duplicates differ from another page in exactly one word.
	fields := map[string][]string{}
	for u, p := range pages {
		fields[u] = strings.Fields(p.Text)
	}
	near := 0
	for _, d := range c.docs {
		if !strings.Contains(d.url, "/draft/") {
			continue
		}
		for u, f := range fields {
			if u != d.url && len(f) == len(fields[d.url]) && len(f) > 0 && differences(f, fields[d.url]) == 1 {
				near++
				break
			}
		}
	}
	if want := int(0.02 * n); near < want {
		t.Errorf("%d near-duplicates, want %d", near, want)
	}

	// Search: common and rare words, never script or style words.
	if total, _ := ix.Search(Word(0), 10); total < n/2 {
		t.Errorf("Search(Word(0)) = %d results", total)
	}
	if total, _ := ix.Search(Word(3000), 10); total == 0 || total > n/20 {
		t.Errorf("Search(Word(3000)) = %d results", total)
	}
	for _, w := range []string{ScriptWord, StyleWord, "track", "color"} {
		if total, _ := ix.Search(w, 10); total != 0 {
			t.Errorf("Search(%q) = %d results", w, total)
		}
	}
	if total, _ := ix.Search("café", 10); total == 0 {
		t.Error("Search(café) found nothing")
	}
}

func sumLinks(pages map[string]*extract.Page) int {
	n := 0
	for u, p := range pages {
		for _, l := range p.Links {
			if pages[l.Target] != nil && l.Target != u {
				n++
			}
		}
	}
	return n
}

func differences(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestStep applies Steps' changes to the parsed pages and checks that they
// reproduce the stepped corpus, and that they move pages between clusters
// and change canonicals.
func TestStep(t *testing.T) {
	c := Generate(5, 600)
	pages, before := index(t, c)
	var deletedEver []string
	for step := range 2 {
		changes := c.Step(int64(step), 0.1)
		ops := map[Op]int{}
		seen := map[string]bool{}
		readded, resolved := 0, 0
		linked := map[string]bool{} // targets of links before the step
		for _, p := range pages {
			for _, l := range p.Links {
				linked[l.Target] = true
			}
		}
		for _, ch := range changes {
			ops[ch.Op]++
			if seen[ch.URL] {
				t.Errorf("step %d: %s changed twice", step, ch.URL)
			}
			seen[ch.URL] = true
			if ch.Op == Delete {
				if pages[ch.URL] == nil {
					t.Errorf("step %d: delete of unloaded %s", step, ch.URL)
				}
				delete(pages, ch.URL)
				deletedEver = append(deletedEver, ch.URL)
				continue
			}
			if (ch.Op == Add) != (pages[ch.URL] == nil) {
				t.Errorf("step %d: %v of %s, loaded: %v", step, ch.Op, ch.URL, pages[ch.URL] != nil)
			}
			if ch.Op == Add && slices.Contains(deletedEver, ch.URL) {
				readded++
			}
			if ch.Op == Add && linked[ch.URL] {
				resolved++
			}
			p, err := extract.Parse(ch.URL, bytes.NewReader(ch.HTML), MaxBody)
			if err != nil {
				t.Fatal(err)
			}
			pages[p.URL] = p
		}
		want, err := c.Pages()
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(pages, want, func(a, b *extract.Page) bool {
			return a.Title == b.Title && a.Text == b.Text && slices.Equal(a.Links, b.Links)
		}) {
			t.Fatalf("step %d: changes do not reproduce the corpus", step)
		}
		after := batch.Compute(pages)
		canonMoved, joined, left := 0, 0, 0
		for _, u := range after.URLs() {
			a, _ := after.Page(u)
			b, ok := before.Page(u)
			if !ok {
				continue
			}
			if a.Canonical != b.Canonical && slices.Equal(a.Duplicates, b.Duplicates) {
				canonMoved++
			}
			if len(a.Duplicates) > len(b.Duplicates) {
				joined++
			}
			if len(a.Duplicates) < len(b.Duplicates) {
				left++
			}
		}
		t.Logf("step %d: %d changes %v; %d canonicals moved, %d joined, %d left a cluster, %d re-added, %d dangling resolved",
			step, len(changes), ops, canonMoved, joined, left, readded, resolved)
		if ops[Put] == 0 || ops[Add] == 0 || ops[Delete] == 0 || canonMoved == 0 || joined == 0 || left == 0 || resolved == 0 {
			t.Errorf("step %d lacks variety", step)
		}
		if step > 0 && readded == 0 {
			t.Errorf("step %d re-added nothing", step)
		}
		before = after
	}
}
