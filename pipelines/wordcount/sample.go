package wordcount

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/framework"
)

// sampleVocabulary gives the sample corpus a Zipf-like word distribution,
// so that a few words are hot (many concurrent updates to their counts).
var sampleVocabulary = strings.Fields(`the of and to in is that it was for on are as with his they at be this from
have or by one had not but what all were when we there can an your which their said if do will each about how up
out them then she many some so these would other into has more her two like him see time could no make than first
been its who now people my made over did down only way find use may water long little very after words called just
where most know get through back much before go good new write our used me man too any day same right look think also
around another came come work three word must because does part even place well such here take why things help put
years different away again off went old number`)

// Sample loads a deterministic corpus — documents added, then some
// rewritten and some deleted — and returns the text each document should
// end with, for Verify.
func Sample(ctx context.Context, db *framework.DB, docs int) (map[string]string, error) {
	rng := rand.New(rand.NewPCG(42, 42))
	final := map[string]string{}
	text := func() string {
		var b strings.Builder
		for range 20 + rng.IntN(60) {
			// Squaring favours the front of the vocabulary.
			i := int(float64(len(sampleVocabulary)) * rng.Float64() * rng.Float64())
			b.WriteString(sampleVocabulary[i] + " ")
		}
		return b.String()
	}
	put := func(id, t string) error {
		if err := Put(ctx, db, id, t); err != nil {
			return fmt.Errorf("wordcount sample: %s: %w", id, err)
		}
		if t == "" {
			delete(final, id)
		} else {
			final[id] = t
		}
		return nil
	}
	for i := range docs {
		if err := put(fmt.Sprintf("doc%05d", i), text()); err != nil {
			return nil, err
		}
	}
	for i := range docs / 4 { // rewrite a quarter, delete a tenth
		if err := put(fmt.Sprintf("doc%05d", rng.IntN(docs)), text()); err != nil {
			return nil, err
		}
		if i%3 == 0 {
			if err := put(fmt.Sprintf("doc%05d", rng.IntN(docs)), ""); err != nil {
				return nil, err
			}
		}
	}
	return final, nil
}

// Verify compares the incremental counts with a count of docs from scratch
// and writes the most frequent words to w.
func Verify(ctx context.Context, db *framework.DB, docs map[string]string, w io.Writer) error {
	want := map[string]int{}
	for _, t := range docs {
		for _, word := range Words(t) {
			want[word]++
		}
	}
	got, err := Counts(ctx, db)
	if err != nil {
		return err
	}
	for word, n := range want {
		if got[word] != n {
			return fmt.Errorf("wordcount: %q counted %d times, a count from scratch says %d", word, got[word], n)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("wordcount: %d distinct words counted, a count from scratch says %d", len(got), len(want))
	}
	words := make([]string, 0, len(got))
	for word := range got {
		words = append(words, word)
	}
	slices.SortFunc(words, func(a, b string) int { return got[b] - got[a] })
	fmt.Fprintf(w, "word count: %d documents, %d distinct words, equal to a count from scratch; most frequent:", len(docs), len(got))
	for _, word := range words[:min(8, len(words))] {
		fmt.Fprintf(w, " %s=%d", word, got[word])
	}
	fmt.Fprintln(w)
	return nil
}
