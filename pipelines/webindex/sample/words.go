package sample

import (
	"math/rand/v2"
	"strings"
)

// VocabularySize is the number of distinct words Word can return; page text
// draws from them with Zipf-like frequencies (Word(0) is the most common).
const VocabularySize = 20000

// ScriptWord appears only inside <script> elements of generated pages, and
// StyleWord only inside <style> elements: neither may ever be searchable.
// Neither can be returned by Word.
const (
	ScriptWord = "trackerscriptonly"
	StyleWord  = "stylesheetonly"
)

// syllables are consonant-vowel pairs; words are concatenations of them, so
// a word never contains two adjacent consonants (unlike ScriptWord).
var syllables = [...]string{
	"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bu",
	"da", "fe", "go", "hi", "ju", "pe", "ro", "to", "wa", "yu",
}

// Word returns the word of frequency rank r (0 is the most frequent), for
// 0 <= r < VocabularySize. Words are lowercase ASCII letters, distinct for
// distinct ranks, and the same in every corpus, so tests can search for a
// common word (Word(0)) or a rare one (Word(VocabularySize-1)).
func Word(r int) string {
	if r < 0 || r >= VocabularySize {
		panic("sample: word rank out of range")
	}
	// Scramble ranks within each length class (the 380 ranks of two
	// syllables, then the rest) so that frequent words do not share
	// prefixes, then write the number in base len(syllables). Both maps
	// are bijections (the multipliers are coprime to the class sizes), and
	// distinct numbers have distinct digit strings.
	const short = 380 // two-digit numbers: 20..399
	var n int
	if r < short {
		n = 20 + r*7%short
	} else {
		n = 400 + (r-short)*7919%(VocabularySize-short)
	}
	var digits []int
	for ; n > 0; n /= len(syllables) {
		digits = append(digits, n%len(syllables))
	}
	var b strings.Builder
	for i := len(digits) - 1; i >= 0; i-- {
		b.WriteString(syllables[digits[i]])
	}
	return b.String()
}

// words caches Word for every rank: rendering looks words up constantly.
var words = func() []string {
	w := make([]string, VocabularySize)
	for r := range w {
		w[r] = Word(r)
	}
	return w
}()

// wordSource draws word ranks with a Zipf distribution.
type wordSource struct {
	z *rand.Zipf
}

func newWordSource(r *rand.Rand) wordSource {
	return wordSource{rand.NewZipf(r, 1.1, 2, VocabularySize-1)}
}

// next returns a random word rank.
func (s wordSource) next() int32 { return int32(s.z.Uint64()) }

// capitalize upper-cases the first letter of an ASCII word.
func capitalize(w string) string {
	if w == "" || w[0] < 'a' || w[0] > 'z' {
		return w
	}
	return string(w[0]-'a'+'A') + w[1:]
}
