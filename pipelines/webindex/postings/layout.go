package postings

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/trickle-dev/trickle/framework"
)

// ErrCorrupt is wrapped by the errors decoding a cell this package did
// not write, so that a damaged store is reported rather than searched.
var ErrCorrupt = errors.New("postings: corrupt cell")

// Families of a term's row (terms/<term>) and the suffix of its impact
// rows. A term's row keeps the postings searches merge and read by
// cluster; its impact rows follow it in key order (a term never holds a
// zero byte), so a scan of the term's row never meets them.
const (
	// BodyFamily holds a term's text postings: qualifier = cluster key,
	// value = EncodePosting(occurrences).
	BodyFamily = "cluster"
	// AnchorFamily holds its anchor postings: qualifier = cluster key,
	// value = EncodePosting(distinct sources, rounded by
	// scoring.AnchorCount).
	AnchorFamily = "anchor"
	// EntryFamily is the one family of an impact row.
	EntryFamily = "i"
	// impactSuffix starts the row keys of a term's impact rows.
	impactSuffix = "\x00i"
)

// DFColumn is the cell of a term's row holding its document frequency
// (EncodeDF): the clusters posted under the term in their text or their
// anchor text.
var DFColumn = framework.Column{Family: "df", Qualifier: "n"}

// postingVersion tags a posting value. A posting written before scoring
// existed has an empty value; it reads as one occurrence.
const postingVersion = 1

// EncodePosting is the value of a cluster's posting under a term.
func EncodePosting(tf int64) []byte {
	return binary.AppendUvarint([]byte{postingVersion}, uint64(tf))
}

// DecodePosting is the inverse of EncodePosting; an empty value (an old
// store's posting) is one occurrence.
func DecodePosting(b []byte) (int64, error) {
	if len(b) == 0 {
		return 1, nil
	}
	if b[0] != postingVersion {
		return 0, fmt.Errorf("%w: posting has unknown version", ErrCorrupt)
	}
	tf, n := binary.Uvarint(b[1:])
	if n <= 0 || n != len(b)-1 || tf < 1 || tf > math.MaxInt64 {
		return 0, fmt.Errorf("%w: posting of %d bytes is malformed", ErrCorrupt, len(b))
	}
	return int64(tf), nil
}

const dfVersion = 1

// EncodeDF is the value of a term's DFColumn.
func EncodeDF(n int64) []byte { return binary.AppendUvarint([]byte{dfVersion}, uint64(n)) }

// DecodeDF is the inverse of EncodeDF.
func DecodeDF(b []byte) (int64, error) {
	if len(b) < 2 || b[0] != dfVersion {
		return 0, fmt.Errorf("%w: document frequency has unknown version", ErrCorrupt)
	}
	n, k := binary.Uvarint(b[1:])
	if k != len(b)-1 || n > math.MaxInt64 {
		return 0, fmt.Errorf("%w: document frequency of %d bytes is malformed", ErrCorrupt, len(b))
	}
	return int64(n), nil
}

// The weights and length normalizations an impact is computed with: the
// defaults of package scoring. They are part of the layout, fixed once
// impacts are stored; a search with other weights scales the bounds by
// how far its weights are from these (Bounds), which keeps them bounds.
const (
	layoutBodyWeight   = 1
	layoutBodyB        = 0.75
	layoutAnchorWeight = 2
	layoutAnchorB      = 0.5
	layoutTitleWeight  = 3
	layoutURLWeight    = 2
)

// UnknownClass is the class of an average length not known yet (an
// index with too few pages to have one): impacts in it are computed as
// for an infinitely long average, the largest any average can give.
const UnknownClass = 255

// MinKnownDocs is how many pages with text an index must count before
// its mean lengths get a class of their own: below it, impacts are
// written in UnknownClass.
const MinKnownDocs = 16

// ClassOf returns the class of the mean length avg of a field: the
// smallest c in 1..254 with ClassHi(c) >= avg, or UnknownClass. Classes
// are an eighth of a power of two wide (9 %).
func ClassOf(avg float64) uint8 {
	if !(avg > 0) || math.IsInf(avg, 0) {
		return UnknownClass
	}
	c := max(1, int(math.Ceil(8*math.Log2(avg))))
	for c < UnknownClass && ClassHi(uint8(c)) < avg {
		c++
	}
	if c >= UnknownClass {
		return UnknownClass
	}
	return uint8(c)
}

// ClassHi is the largest mean length of class c, which the impacts of
// the class are computed with (+Inf for UnknownClass).
func ClassHi(c uint8) float64 {
	if c == UnknownClass || c == 0 {
		return math.Inf(1)
	}
	return math.Exp2(float64(c) / 8)
}

// Flags say which fields of a cluster hold a term: an impact row holds
// the entries of one combination, so a search knows, from the rows it has
// not finished, which fields the clusters it has not read can hold.
type Flags uint8

const (
	InBody Flags = 1 << iota
	InAnchor
	InTitle
	InURL
)

// Run names one impact row of a term: the fields its entries hold the
// term in, the classes of the mean lengths their impacts were computed
// with (0 for a field they do not hold the term in), and the class of
// their clusters' link-based prior (PriorClassOf).
type Run struct {
	Flags                  Flags
	BodyClass, AnchorClass uint8
	PriorClass             uint8
}

// Prior classes: the link-based prior of package scoring,
// min(1, ln(1+rank)/ln(1+cap)), computed with the layout's cap and cut
// into PriorClasses equal steps; class c (1 to PriorClasses) holds priors
// up to c/PriorClasses. A rank of 0 is in class 1 with the small ones, so
// that a page's first inlink moves none of its entries.
const (
	PriorClasses   = 4
	layoutPriorCap = 1000
)

// PriorClassOf returns the prior class of a cluster whose canonical's
// rank, as the score takes it (scoring.Doc.Prior), is rank.
func PriorClassOf(rank float64) uint8 {
	if !(rank > 0) {
		return 1
	}
	p := min(1, math.Log1p(rank)/math.Log1p(layoutPriorCap))
	c := uint8(math.Ceil(p * PriorClasses))
	for c < PriorClasses && priorHi(c) < p {
		c++
	}
	return max(c, 1)
}

// priorHi is the largest layout prior of class c.
func priorHi(c uint8) float64 { return float64(c) / PriorClasses }

// Contribution is what one cluster holds of one term: its occurrences in
// the text, its anchor count (scoring.AnchorCount of its sources) and its
// occurrences in the canonical's result title and URL path.
type Contribution struct {
	Body, Anchor, Title, URL int64
}

// Zero reports whether the cluster holds the term nowhere.
func (c Contribution) Zero() bool { return c == Contribution{} }

// Matches reports whether the term is one the cluster matches a query
// word by: in its text or its anchor text.
func (c Contribution) Matches() bool { return c.Body > 0 || c.Anchor > 0 }

// Shape is what a cluster's impacts depend on besides its contributions:
// its text's and anchor field's lengths and the classes of the mean
// lengths its impacts are computed with. AnchorLen may be below the
// anchor field's length: a longer field only lowers the anchor share, so
// the cluster's recompute rewrites every anchor entry only when the field
// becomes shorter than the length they were computed with. The cluster's state keeps it, so
// that the entries it wrote can be found again to delete.
type Shape struct {
	BodyLen, AnchorLen     int64
	BodyClass, AnchorClass uint8
	// PriorClass is at least the class of the cluster's prior: its
	// recompute moves the entries up when the rank rises past it, and
	// leaves them when it falls, so that a rank that comes and goes
	// does not move every entry each time.
	PriorClass uint8
}

// Entry is a cluster's entry in a term's impact row. Its value holds the
// cluster's postings under the term (Body, Anchor), so that a search
// scoring a cluster it met in the row need not read them again.
type Entry struct {
	Run          Run
	Impact       float32
	Cluster      string
	Body, Anchor int64
}

const entryVersion = 1

// Value is the entry's value in its impact row.
func (e Entry) Value() []byte {
	b := binary.AppendUvarint([]byte{entryVersion}, uint64(e.Body))
	return binary.AppendUvarint(b, uint64(e.Anchor))
}

// ParseValue reads an entry's value into its Body and Anchor.
func (e *Entry) ParseValue(b []byte) error {
	if len(b) == 0 || b[0] != entryVersion {
		return fmt.Errorf("%w: impact entry value has unknown version", ErrCorrupt)
	}
	body, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return fmt.Errorf("%w: impact entry value of %d bytes", ErrCorrupt, len(b))
	}
	anchor, m := binary.Uvarint(b[1+n:])
	if m <= 0 || 1+n+m != len(b) || body > math.MaxInt64 || anchor > math.MaxInt64 {
		return fmt.Errorf("%w: impact entry value of %d bytes", ErrCorrupt, len(b))
	}
	e.Body, e.Anchor = int64(body), int64(anchor)
	return nil
}

// MakeEntry returns the entry of a cluster holding c of a term, with
// shape s; false if it holds the term nowhere. Its impact is at least
// the blended term frequency (tf~ in package scoring) of the term in the
// cluster with the layout's weights and with mean lengths up to the
// classes' (Bounds scales it for others).
func MakeEntry(cluster string, c Contribution, s Shape) (Entry, bool) {
	if c.Zero() {
		return Entry{}, false
	}
	var q float64
	r := Run{PriorClass: s.PriorClass}
	if c.Body > 0 {
		r.Flags |= InBody
		r.BodyClass = s.BodyClass
		q += layoutBodyWeight * float64(c.Body) / (1 - layoutBodyB + layoutBodyB*float64(s.BodyLen)/ClassHi(s.BodyClass))
	}
	if c.Anchor > 0 {
		r.Flags |= InAnchor
		r.AnchorClass = s.AnchorClass
		q += layoutAnchorWeight * float64(c.Anchor) / (1 - layoutAnchorB + layoutAnchorB*float64(s.AnchorLen)/ClassHi(s.AnchorClass))
	}
	if c.Title > 0 {
		r.Flags |= InTitle
		q += layoutTitleWeight * float64(c.Title)
	}
	if c.URL > 0 {
		r.Flags |= InURL
		q += layoutURLWeight * float64(c.URL)
	}
	return Entry{Run: r, Impact: roundUp(q), Cluster: cluster, Body: c.Body, Anchor: c.Anchor}, true
}

// roundUp is the smallest float32 at least x.
func roundUp(x float64) float32 {
	f := float32(x)
	if float64(f) < x {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// ImpactPrefix is the start of the row keys of term's impact rows.
func ImpactPrefix(term string) []byte { return append([]byte(term), impactSuffix...) }

// RunRow is the key of term's impact row r.
func RunRow(term string, r Run) []byte {
	b := make([]byte, 0, len(term)+len(impactSuffix)+8)
	b = append(append(b, term...), impactSuffix...)
	for _, v := range []uint8{uint8(r.Flags), r.BodyClass, r.AnchorClass, r.PriorClass} {
		b = append(b, hexDigits[v>>4], hexDigits[v&15])
	}
	return b
}

const hexDigits = "0123456789abcdef"

// ParseRunRow returns the run of an impact row of term.
func ParseRunRow(term string, row []byte) (Run, error) {
	p := ImpactPrefix(term)
	if len(row) != len(p)+8 || string(row[:len(p)]) != string(p) {
		return Run{}, fmt.Errorf("%w: %q is not an impact row of %q", ErrCorrupt, row, term)
	}
	v, err := strconv.ParseUint(string(row[len(p):]), 16, 32)
	if err != nil {
		return Run{}, fmt.Errorf("%w: impact row %q: %v", ErrCorrupt, row, err)
	}
	return Run{Flags: Flags(v >> 24), BodyClass: uint8(v >> 16), AnchorClass: uint8(v >> 8), PriorClass: uint8(v)}, nil
}

// Qualifier is the entry's qualifier in its impact row: its impact,
// inverted so that the row lists the largest first, then its cluster.
func (e Entry) Qualifier() string {
	b := make([]byte, 8, 8+len(e.Cluster))
	v := ^math.Float32bits(e.Impact)
	for i := 7; i >= 0; i-- {
		b[i] = hexDigits[v&15]
		v >>= 4
	}
	return string(append(b, e.Cluster...))
}

// Column is the entry's column in its impact row.
func (e Entry) Column() framework.Column {
	return framework.Column{Family: EntryFamily, Qualifier: e.Qualifier()}
}

// ParseQualifier returns the impact and cluster of an entry's qualifier.
func ParseQualifier(q string) (impact float32, cluster string, err error) {
	if len(q) < 8 {
		return 0, "", fmt.Errorf("%w: impact entry %q", ErrCorrupt, q)
	}
	v, err := strconv.ParseUint(q[:8], 16, 32)
	if err != nil {
		return 0, "", fmt.Errorf("%w: impact entry %q: %v", ErrCorrupt, q, err)
	}
	f := math.Float32frombits(^uint32(v))
	if !(f >= 0) {
		return 0, "", fmt.Errorf("%w: impact entry %q has impact %v", ErrCorrupt, q, f)
	}
	return f, q[8:], nil
}
