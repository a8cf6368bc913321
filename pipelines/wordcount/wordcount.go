// Package wordcount is an incremental word count: documents arrive, change
// and disappear one at a time, and the count of every word stays exact
// without ever recounting the corpus.
//
// One strong observer watches each document's text. When it changes, the
// observer subtracts the words of the text it counted last time (kept beside
// the document) and adds the words of the new text, in the same transaction
// that records the new text as counted. A re-delivered or collapsed
// notification therefore never counts anything twice.
//
// Common words are in nearly every document, so their counts would be
// collision hot spots if every document's observer updated them directly.
// Instead the observer queues its per-word deltas (package combine) and a
// weak observer per word folds them into the count.
package wordcount

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unicode"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/combine"
)

// Tables and columns.
const (
	DocsTable  = "docs"
	WordsTable = "words"
)

var (
	// Text is a document's current text; writing it triggers the count.
	Text = framework.Column{Family: "doc", Qualifier: "text"}
	// counted is the text the observer last counted.
	counted = framework.Column{Family: "doc", Qualifier: "counted"}
	// Count is a word's number of occurrences.
	Count = framework.Column{Family: "count", Qualifier: "n"}
)

// counts folds queued per-word deltas into Count.
var counts = must(combine.New(combine.Config{Name: "wordcount-sum", Table: WordsTable, Value: Count, Combine: combine.SumInt}))

func must(q *combine.Queue, err error) *combine.Queue {
	if err != nil {
		panic(err)
	}
	return q
}

// Register adds the word count observers to reg.
func Register(reg *framework.Registry) error {
	if err := counts.Register(reg); err != nil {
		return err
	}
	return reg.Register(framework.Observer{
		Name: "wordcount", Table: DocsTable, Columns: []framework.Column{Text}, Kind: framework.Strong, Fn: observe,
	})
}

// Words splits text into lowercased runs of letters and digits.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func observe(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	newText, err := getOrEmpty(ctx, tx, DocsTable, row, Text)
	if err != nil {
		return err
	}
	oldText, err := getOrEmpty(ctx, tx, DocsTable, row, counted)
	if err != nil {
		return err
	}
	delta := map[string]int{}
	for _, w := range Words(oldText) {
		delta[w]--
	}
	for _, w := range Words(newText) {
		delta[w]++
	}
	for w, d := range delta {
		if d == 0 {
			continue
		}
		if err := counts.Add(tx, []byte(w), string(row), []byte(strconv.Itoa(d))); err != nil {
			return err
		}
	}
	if newText == "" {
		return tx.Delete(DocsTable, row, counted)
	}
	return tx.Set(DocsTable, row, counted, []byte(newText))
}

func getOrEmpty(ctx context.Context, tx *framework.Txn, table string, row []byte, col framework.Column) (string, error) {
	v, err := tx.Get(ctx, table, row, col)
	if errors.Is(err, framework.ErrNotFound) {
		return "", nil
	}
	return string(v), err
}

// Put sets (or, with empty text, deletes) a document.
func Put(ctx context.Context, db *framework.DB, id, text string) error {
	return db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		if text == "" {
			return tx.Delete(DocsTable, []byte(id), Text)
		}
		return tx.Set(DocsTable, []byte(id), Text, []byte(text))
	})
}

// Counts reads every word count in one snapshot.
func Counts(ctx context.Context, db *framework.DB) (map[string]int, error) {
	out := map[string]int{}
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: WordsTable, Columns: []framework.Column{Count}}) {
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(string(e.Value))
			if err != nil {
				return err
			}
			out[string(e.Row)] = n
		}
		return nil
	})
	return out, err
}
