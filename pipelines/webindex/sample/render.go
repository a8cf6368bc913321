package sample

import (
	"html"
	"strconv"
	"strings"
)

// navLinks is how many of a page's first links go in its navigation bar;
// the others follow the paragraphs, spread evenly, in document order.
const navLinks = 3

// render writes page d's HTML.
func render(d *doc) []byte { return renderContent(d.c, d.base) }

// renderContent writes the HTML of content c for a page at URL base (which
// relative links are relative to). Equal contents and bases give equal
// bytes; equal contents give equal text whatever the bases.
func renderContent(c *content, base string) []byte {
	var b strings.Builder
	b.Grow(256 + 40*len(c.links) + 8*len(c.paras)*40)
	if c.stub {
		// A redirect stub: no title, no text, only image links.
		b.WriteString("<!DOCTYPE html>\n<html><head><meta http-equiv=\"refresh\" content=\"0; url=")
		if len(c.links) > 0 {
			b.WriteString(html.EscapeString(href(base, c.links[0])))
		}
		b.WriteString("\"></head>\n<body>\n")
	} else {
		b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>")
		writeWords(&b, c.title, true)
		b.WriteString("</title>\n")
		if c.style {
			b.WriteString("<style>." + StyleWord + " { color: #333; margin: 0 }</style>\n")
		}
		b.WriteString("</head>\n<body>\n<h1>")
		writeWords(&b, c.title, true)
		b.WriteString("</h1>\n")
	}
	nav := min(navLinks, len(c.links))
	b.WriteString("<nav>")
	for i, l := range c.links[:nav] {
		if i > 0 {
			b.WriteString(" | ")
		}
		writeLink(&b, base, l)
	}
	b.WriteString("</nav>\n")
	rest := c.links[nav:]
	for i, p := range c.paras {
		b.WriteString("<p>")
		writeSentences(&b, p, c.deco, i == 0)
		b.WriteString("</p>\n")
		// Paragraph i is followed by its share of the remaining links.
		lo, hi := i*len(rest)/len(c.paras), (i+1)*len(rest)/len(c.paras)
		if lo < hi {
			b.WriteString("<ul>")
			for _, l := range rest[lo:hi] {
				b.WriteString("<li>")
				writeLink(&b, base, l)
				b.WriteString("</li>")
			}
			b.WriteString("</ul>\n")
		}
	}
	if len(c.paras) == 0 {
		for _, l := range rest {
			writeLink(&b, base, l)
			b.WriteByte('\n')
		}
	}
	if c.script {
		b.WriteString("<script>var " + ScriptWord + " = {page: 1}; if (1 < 2) { track(\"</p>\"); }</script>\n")
	}
	b.WriteString("</body></html>\n")
	return []byte(b.String())
}

// writeWords writes words separated by spaces, capitalized if title.
func writeWords(b *strings.Builder, ws []int32, title bool) {
	for i, w := range ws {
		if i > 0 {
			b.WriteByte(' ')
		}
		if title {
			b.WriteString(capitalize(words[w]))
		} else {
			b.WriteString(words[w])
		}
	}
}

// writeSentences writes a paragraph's words as sentences of nine words,
// with the decorations deco asks for when first is set.
func writeSentences(b *strings.Builder, ws []int32, deco uint8, first bool) {
	for i, w := range ws {
		if i > 0 {
			switch {
			case first && i == 3 && deco&decoAmp != 0:
				b.WriteString(" &amp; ")
			case first && i == 5 && deco&decoNbsp != 0:
				b.WriteString("&nbsp;")
			case i%9 == 4:
				b.WriteString(" <em>")
				b.WriteString(words[w])
				b.WriteString("</em>")
				continue
			default:
				b.WriteByte(' ')
			}
		}
		if i%9 == 0 {
			b.WriteString(capitalize(words[w]))
		} else {
			b.WriteString(words[w])
		}
		if i%9 == 8 || i == len(ws)-1 {
			b.WriteByte('.')
		}
	}
	if first && deco&decoCafe != 0 {
		b.WriteString(" Café.")
	}
}

// writeLink writes one <a>: an image when the anchor is empty.
func writeLink(b *strings.Builder, base string, l link) {
	b.WriteString(`<a href="`)
	b.WriteString(html.EscapeString(href(base, l)))
	b.WriteString(`">`)
	if l.anchor == "" {
		b.WriteString(`<img src="/img/icon.png" alt="icon">`)
	} else {
		b.WriteString(l.anchor)
	}
	b.WriteString("</a>")
}

// href spells the link l on a page whose URL is base.
func href(base string, l link) string {
	bo, bp := splitURL(base)
	to, tp := splitURL(l.target)
	f := l.form
	if bo != to && (f == formRoot || f == formRel) {
		f = formAbs
	}
	var s string
	switch f {
	case formAbs:
		s = l.target
	case formUpper:
		s = shout(to) + tp
	case formRoot:
		s = tp
	case formRel:
		s = relative(bp, tp)
	}
	if l.frag {
		s += "#s" + strconv.Itoa(len(l.anchor)%4)
	}
	return s
}

// splitURL splits an absolute URL with a path into origin and path.
func splitURL(u string) (origin, path string) {
	i := strings.Index(u, "://") + 3
	j := strings.IndexByte(u[i:], '/')
	if j < 0 {
		return u, "/"
	}
	return u[:i+j], u[i+j:]
}

// shout spells an origin in upper case with an explicit default port, which
// normalization undoes: "http://a.example" becomes "HTTP://A.EXAMPLE:80".
func shout(origin string) string {
	s := strings.ToUpper(origin)
	if strings.LastIndexByte(s, ':') > len("HTTPS:") {
		return s // already has a port
	}
	if strings.HasPrefix(s, "HTTPS:") {
		return s + ":443"
	}
	return s + ":80"
}

// relative returns a relative reference from a page at path from to path
// to, both absolute paths of the same origin.
func relative(from, to string) string {
	fd := strings.Split(from[:strings.LastIndexByte(from, '/')], "/")
	i := strings.LastIndexByte(to, '/')
	td, file := strings.Split(to[:i], "/"), to[i+1:]
	n := 0
	for n < len(fd) && n < len(td) && fd[n] == td[n] {
		n++
	}
	var b strings.Builder
	for range fd[n:] {
		b.WriteString("../")
	}
	for _, s := range td[n:] {
		b.WriteString(s)
		b.WriteByte('/')
	}
	b.WriteString(file)
	if b.Len() == 0 {
		return "./"
	}
	return b.String()
}
