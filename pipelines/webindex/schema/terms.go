package schema

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unicode"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// IsWordRune reports whether r is part of a word: words are the maximal
// runs of letters and digits (as extract.Tokenize splits them).
func IsWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// TermCounts counts the occurrences of each search token of text
// (extract.Tokenize: words, identifiers and camelCase parts) and the
// number of its words: the term frequencies and the length BM25 weighs.
func TermCounts(text string) (counts map[string]int64, words int64) {
	counts = map[string]int64{}
	extract.Tokenize(text, func(t string, kind extract.TokenKind, _ int) bool {
		counts[t]++
		if kind == extract.Word {
			words++
		}
		return true
	})
	return counts, words
}

// SortedTerms returns the keys of counts, sorted: what extract.Terms
// returns for the same text.
func SortedTerms(counts map[string]int64) []string {
	out := make([]string, 0, len(counts))
	for t := range counts {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// postingVersion tags a posting value. A posting written before scoring
// existed has an empty value; it scores as one occurrence (see readTF).
const postingVersion = 1

// EncodePosting is the value of a cluster's posting under a term: how
// often the term occurs in the cluster's text.
func EncodePosting(tf int64) []byte {
	return binary.AppendUvarint([]byte{postingVersion}, uint64(tf))
}

// decodePosting is the inverse of EncodePosting; an empty value (an old
// store's posting) is one occurrence.
func decodePosting(b []byte) (int64, error) {
	if len(b) == 0 {
		return 1, nil
	}
	if b[0] != postingVersion {
		return 0, fmt.Errorf("%w: posting has unknown version", ErrCorrupt)
	}
	d := NewDecoder(b[1:])
	tf := int64(d.Uvarint())
	if d.Err() != nil || d.Len() != 0 || tf < 1 {
		return 0, fmt.Errorf("%w: posting of %d bytes is malformed", ErrCorrupt, len(b))
	}
	return tf, nil
}
