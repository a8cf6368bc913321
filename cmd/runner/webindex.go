package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
	"github.com/trickle-dev/trickle/runner"
)

// sampleSize is the size of the demo's samples (-sample): pages of the
// generated web corpus, documents of the word count.
var sampleSize = 1000

// demoStep is the share of the web corpus the demo changes incrementally.
const demoStep = 0.05

// webindexDemo loads a generated corpus, lets the observers index it, then
// changes 5% of it (edits, deletes, new pages) and returns a report that
// checks the incremental result against a from-scratch computation.
func webindexDemo(ctx context.Context, r *runner.Runner) (func(context.Context, io.Writer) error, error) {
	c := sample.Generate(1, sampleSize)
	var first []sample.Change
	for d := range c.All() {
		first = append(first, sample.Change{Op: sample.Add, URL: d.URL, HTML: d.HTML})
	}
	if err := loadChanges(ctx, r.DB(), first); err != nil {
		return nil, err
	}
	fmt.Printf("  %d pages loaded; waiting for the index, then changing %.0f%% of them...\n", len(first), 100*demoStep)
	if _, err := runner.Wait(ctx, r.Node(), runner.WaitOptions{}); err != nil {
		return nil, err
	}
	before := r.Stats().Runs
	step := c.Step(2, demoStep)
	if err := loadChanges(ctx, r.DB(), step); err != nil {
		return nil, err
	}
	if _, err := runner.Wait(ctx, r.Node(), runner.WaitOptions{}); err != nil {
		return nil, err
	}
	ran := r.Stats().Runs - before
	return func(ctx context.Context, w io.Writer) error {
		return reportWebindex(ctx, w, r, c, step, ran)
	}, nil
}

// loadChanges loads changes through the loader engine, as cmd/loader
// would, and fails if any of them could not be loaded.
func loadChanges(ctx context.Context, db *framework.DB, changes []sample.Change) error {
	src := func(yield func(input.Record, error) bool) {
		for i, ch := range changes {
			rec := input.Record{URL: ch.URL, Body: ch.HTML, Delete: ch.Op == sample.Delete, Source: "sample", Offset: -1, Line: i + 1}
			if !yield(rec, nil) {
				return
			}
		}
	}
	sum, err := loader.Run(ctx, db, src, loader.Options{MaxBody: sample.MaxBody})
	if err != nil {
		return err
	}
	if !sum.OK() {
		return fmt.Errorf("loading the sample: %d bad, %d failed, %d abandoned pages", sum.Bad, sum.Failed, sum.Abandoned)
	}
	return nil
}

// reportWebindex prints what the index holds and verifies it.
func reportWebindex(ctx context.Context, w io.Writer, r *runner.Runner, c *sample.Corpus, step []sample.Change, ran uint64) error {
	pages, err := c.Pages()
	if err != nil {
		return err
	}
	want := batch.Compute(pages)
	var changed []string
	for _, ch := range step {
		changed = append(changed, ch.URL)
	}
	queries := []string{sample.Word(0), sample.Word(1) + " " + sample.Word(2), sample.Word(50), sample.Word(5000), sample.ScriptWord}
	checked, diffs, err := webIndex.Verify(ctx, r.DB(), want, changed, queries, 10)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "web index: %d pages; the %d changes took %d observer transactions\n", checked, len(step), ran)
	top, err := webIndex.Top(ctx, r.DB(), 5)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "  most linked canonicals:")
	for _, t := range top {
		fmt.Fprintf(w, "    %5d  %s  %s\n", t.InboundCount, t.URL, t.Title)
	}
	q := sample.Word(3) + " " + sample.Word(7)
	total, res, err := webIndex.Search(ctx, r.DB(), q, 3)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  search %q: %d results, first %s\n", q, total, strings.Join(urls(res), ", "))
	if len(diffs) > 0 {
		for _, d := range diffs {
			fmt.Fprintln(w, "  MISMATCH", d)
		}
		return fmt.Errorf("web index differs from a from-scratch computation in %d places", len(diffs))
	}
	fmt.Fprintf(w, "  every page, %d searches and the top list equal a from-scratch computation\n", len(queries))
	if addr := r.HTTPAddr(); addr != "" {
		fmt.Fprintf(w, "  browse it: http://%s/\n", addr)
	}
	return nil
}

func urls(rs []query.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.URL
	}
	return out
}
