// Command relevance measures how well the web index's search finds the page
// a query is about, on real documentation corpora: it runs judged query
// sets (package pipelines/webindex/relevance; each query with the URL of
// the page that answers it) and reports hits@1, hits@3 and the mean
// reciprocal rank.
//
//	relevance sets                          list the judged sets kept in the repository
//	relevance fetch [-dir D] SET...         download each set's Debian package and unpack it under D/PACKAGE
//	relevance run [-dir D] [-v] SET...      index each set's corpus (from D/PACKAGE) in memory and run its queries
//	relevance run -api URL [-v] SET...      run the queries against a runner's JSON API instead
//
// SET is the name of a kept set (python, postgresql, cppreference) or the
// path of a judged set file (see relevance.ParseSet). fetch runs
// `apt-get download` and `dpkg -x`, so it needs Debian's package tools
// and repositories; the corpora are never part of the repository. run
// without -api bulk loads the corpus into an in-memory index with the
// default options, as `loader -bulk` would load it into a runner's, and
// searches it in process; with -api it asks /api/search of the runner
// serving the index the corpus was loaded into (loader -bulk -dir
// D/PACKAGE/ROOT -base-url BASE, the set's root and base-url), so that any
// build of the index can be measured.
//
// The exit status is 0 when every set ran, 1 otherwise.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
	"github.com/trickle-dev/trickle/pipelines/webindex/relevance"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: relevance COMMAND [flags] SET...

commands:
  sets    list the judged sets kept in the repository
  fetch   download each set's Debian package (apt-get download) and unpack it (dpkg -x) under -dir
  run     run each set's queries: on its corpus under -dir, indexed in memory, or against -api

SET is a kept set's name or a judged set file.
`

// flags is what the commands' flags set.
type flags struct {
	dir, api string
	verbose  bool
}

// newFlagSet defines the flags of the command cmd on f. Problems are
// returned, not printed, so that run says them once.
func newFlagSet(cmd string, f *flags) *flag.FlagSet {
	fs := flag.NewFlagSet("relevance "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&f.dir, "dir", "corpora", "where corpora are unpacked, one directory per package")
	fs.StringVar(&f.api, "api", "", "run: base URL of a runner's HTTP API to search (e.g. http://127.0.0.1:8080); empty: index the corpus in memory")
	fs.BoolVar(&f.verbose, "v", false, "run: show the first results of each query whose page is not first")
	return fs
}

// printUsage writes the commands and the flags.
func printUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	fmt.Fprintln(w, "\nflags:")
	fs := newFlagSet("", &flags{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return 1
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		printUsage(stdout)
		return 0
	case "sets", "fetch", "run":
	default:
		fmt.Fprintf(stderr, "relevance: unknown command %q (see relevance -help)\n", args[0])
		return 1
	}
	cmd, args := args[0], args[1:]
	var f flags
	fs := newFlagSet(cmd, &f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "relevance %s: %v (see relevance -help)\n", cmd, err)
		return 1
	}
	if cmd == "sets" {
		for _, s := range relevance.Sets() {
			fmt.Fprintln(stdout, s)
		}
		return 0
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "relevance %s: name at least one set (%s) or judged set file\n", cmd, strings.Join(relevance.Sets(), ", "))
		return 1
	}
	code := 0
	for _, name := range fs.Args() {
		set, err := loadSet(name)
		if err == nil {
			switch cmd {
			case "fetch":
				err = fetch(ctx, set, f.dir, stdout)
			case "run":
				err = evaluate(ctx, set, f.dir, f.api, f.verbose, stdout)
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "relevance %s: %v\n", cmd, err)
			code = 1
		}
	}
	return code
}

// loadSet reads a kept set by name, or a judged set file by path.
func loadSet(name string) (*relevance.Set, error) {
	if !strings.ContainsAny(name, `/\.`) {
		return relevance.LoadSet(name)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return relevance.ParseSet(strings.TrimSuffix(filepath.Base(name), ".judged"), f)
}

// fetch downloads set's package into a temporary directory and unpacks
// it into dir/PACKAGE.
func fetch(ctx context.Context, set *relevance.Set, dir string, stdout io.Writer) error {
	dest := filepath.Join(dir, set.Package)
	if _, err := os.Stat(filepath.Join(dest, set.Root)); err == nil {
		fmt.Fprintf(stdout, "%s: %s is there already\n", set.Name, filepath.Join(dest, set.Root))
		return nil
	}
	tmp, err := os.MkdirTemp("", "relevance-fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dl := exec.CommandContext(ctx, "apt-get", "download", set.Package)
	dl.Dir, dl.Stdout, dl.Stderr = tmp, os.Stderr, os.Stderr
	if err := dl.Run(); err != nil {
		return fmt.Errorf("apt-get download %s: %w (run apt-get update first?)", set.Package, err)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, set.Package+"_*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s left %d packages, want 1", set.Package, len(debs))
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	x := exec.CommandContext(ctx, "dpkg", "-x", debs[0], dest)
	x.Stdout, x.Stderr = os.Stderr, os.Stderr
	if err := x.Run(); err != nil {
		return fmt.Errorf("dpkg -x %s: %w", filepath.Base(debs[0]), err)
	}
	if _, err := os.Stat(filepath.Join(dest, set.Root)); err != nil {
		return fmt.Errorf("%s holds no %s: %w", set.Package, set.Root, err)
	}
	fmt.Fprintf(stdout, "%s: %s\n", set.Name, filepath.Join(dest, set.Root))
	return nil
}

// evaluate runs set against the API at api, or else against an index of
// its corpus under dir built in memory.
func evaluate(ctx context.Context, set *relevance.Set, dir, api string, verbose bool, stdout io.Writer) error {
	var s relevance.Searcher
	if api != "" {
		s = &apiSearcher{base: strings.TrimSuffix(api, "/"), client: &http.Client{Timeout: time.Minute}}
	} else {
		mem, err := indexCorpus(ctx, set, filepath.Join(dir, set.Package, set.Root), stdout)
		if err != nil {
			return err
		}
		defer mem.close()
		s = mem
	}
	r, err := relevance.Evaluate(ctx, s, set)
	if err != nil {
		return err
	}
	return r.Print(stdout, verbose)
}

// apiSearcher searches through a runner's /api/search.
type apiSearcher struct {
	base   string
	client *http.Client
}

func (a *apiSearcher) Search(ctx context.Context, query string, limit int) ([]string, error) {
	u := fmt.Sprintf("%s/api/search?q=%s&limit=%d", a.base, url.QueryEscape(query), limit)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, bytes.TrimSpace(body))
	}
	var page struct {
		Results []struct {
			URL string `json:"url"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	out := make([]string, len(page.Results))
	for i, r := range page.Results {
		out[i] = r.URL
	}
	return out, nil
}

// memIndex is a corpus indexed in memory.
type memIndex struct {
	env *frameworktest.Env
	ix  *webindex.Index
}

func (m *memIndex) close() { m.env.Close() }

func (m *memIndex) Search(ctx context.Context, q string, limit int) ([]string, error) {
	p, err := m.ix.SearchPage(ctx, m.env.DB(), query.SearchRequest{Query: q, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(p.Results))
	for i, r := range p.Results {
		out[i] = r.URL
	}
	return out, nil
}

// indexCorpus reads every page under root, as loader -dir would, and bulk
// loads them into an index in memory with the default options.
func indexCorpus(ctx context.Context, set *relevance.Set, root string, stdout io.Writer) (*memIndex, error) {
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("%s: no corpus at %s (relevance fetch %s): %w", set.Name, root, set.Name, err)
	}
	began := time.Now()
	var recs []input.Record
	for rec, err := range input.Dir(root, set.BaseURL, input.Options{}) {
		var bad *input.BadRecord
		switch {
		case errors.As(err, &bad):
			continue
		case err != nil:
			return nil, err
		}
		recs = append(recs, rec)
	}
	pages := make([]*extract.Page, len(recs))
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				next.Lock()
				j := i
				i++
				next.Unlock()
				if j >= len(recs) {
					return
				}
				if p, err := extract.Parse(recs[j].URL, bytes.NewReader(recs[j].Body), input.DefaultMaxBody); err == nil {
					pages[j] = p
				}
			}
		})
	}
	wg.Wait()
	byURL := make(map[string]*extract.Page, len(pages))
	for _, p := range pages {
		if p != nil {
			byURL[p.URL] = p
		}
	}
	ix, err := webindex.New(nil)
	if err != nil {
		return nil, err
	}
	reg := framework.NewRegistry()
	if err := ix.Register(reg); err != nil {
		return nil, err
	}
	env, err := frameworktest.Start(ctx, reg, &frameworktest.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	if _, err := ix.BulkLoad(ctx, env.DB(), byURL, nil); err != nil {
		env.Close()
		return nil, err
	}
	fmt.Fprintf(stdout, "%s: indexed %d pages of %s in %v\n", set.Name, len(byURL), root, time.Since(began).Round(time.Millisecond))
	return &memIndex{env: env, ix: ix}, nil
}
