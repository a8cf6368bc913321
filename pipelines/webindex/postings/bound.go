package postings

import (
	"math"

	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// Bounds turns the impacts of a term's entries into bounds of the term's
// blended frequency in a search with weights p over a corpus c.
//
// An impact was computed with the layout's weights and with the mean
// lengths of its classes (ClassHi). A text's share of the blended
// frequency with weight w and normalization B, b/(1-B+B·r/A), is at most
// its share in the impact times w/layoutWeight, times
// max((1-B₀)/(1-B), B₀/B) for the other normalization (the ratio of the
// two normalizations is monotone in r/A, so it is largest at 0 or at
// infinity), times max(1, A/ClassHi) for a mean length A above the one
// the impact assumed; the same holds of the anchor text. Title and URL
// scale by their weights alone. A run's factor is the largest of those of
// its fields.
type Bounds struct {
	body, anchor, title, url float64
	avgBody, avgAnchor       float64
	priorScale               float64
}

// NewBounds returns the bounds of a search with effective weights p
// (scoring.Params.Effective) over c.
func NewBounds(p *scoring.Params, c *scoring.Corpus) *Bounds {
	return &Bounds{
		body:      fieldFactor(p.BodyWeight, layoutBodyWeight, p.BodyB, layoutBodyB),
		anchor:    fieldFactor(p.AnchorWeight, layoutAnchorWeight, p.AnchorB, layoutAnchorB),
		title:     p.TitleWeight / layoutTitleWeight,
		url:       p.URLWeight / layoutURLWeight,
		avgBody:   c.AvgBody,
		avgAnchor: c.AvgAnchor,
		// ln(1+rank)/ln(1+cap) scales by the ratio of the caps' logs.
		priorScale: priorScale(p.PriorCap),
	}
}

func priorScale(cap float64) float64 {
	if cap <= 0 {
		return 0
	}
	return math.Log1p(layoutPriorCap) / math.Log1p(cap)
}

// Prior bounds the prior (in [0, 1]) of a cluster of prior class c.
func (b *Bounds) Prior(c uint8) float64 {
	switch {
	case b.priorScale == 0:
		return 0 // no prior
	case c >= PriorClasses:
		return 1
	}
	return min(1, priorHi(c)*b.priorScale)
}

// fieldFactor bounds the ratio of a length-normalized field's share with
// weight w and normalization b to its share with the layout's.
func fieldFactor(w, w0, b, b0 float64) float64 {
	if w <= 0 {
		return 0
	}
	ratio := func(num, den float64) float64 {
		switch {
		case num == 0:
			return 0
		case den <= 0:
			return math.Inf(1)
		}
		return num / den
	}
	return w / w0 * max(ratio(1-b0, 1-b), ratio(b0, b))
}

// Factor returns the factor by which the impacts of run r bound the
// blended frequency.
func (b *Bounds) Factor(r Run) float64 {
	f := 0.0
	if r.Flags&InBody != 0 {
		f = max(f, b.body*max(1, b.avgBody/ClassHi(r.BodyClass)))
	}
	if r.Flags&InAnchor != 0 {
		f = max(f, b.anchor*max(1, b.avgAnchor/ClassHi(r.AnchorClass)))
	}
	if r.Flags&InTitle != 0 {
		f = max(f, b.title)
	}
	if r.Flags&InURL != 0 {
		f = max(f, b.url)
	}
	return f
}

// Bound returns the bound of the blended frequency of an entry of run r
// with impact q.
func (b *Bounds) Bound(r Run, q float32) float64 {
	f := b.Factor(r)
	if f == 0 || q == 0 {
		return 0
	}
	return f * float64(q)
}
