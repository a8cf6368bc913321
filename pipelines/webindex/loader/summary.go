package loader

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// Counts are the loader's counters. Once Run returns, every record read
// has ended in exactly one of Loaded, Replaced, Unchanged, Deleted,
// Superseded, Bad, Failed and Abandoned.
type Counts struct {
	// Read is the number of records (pages and deletions) the sources
	// yielded, and of bad records they reported.
	Read int64
	// Loaded is the number of pages added (not in the index before).
	Loaded int64
	// Replaced is the number of pages whose stored document changed.
	Replaced int64
	// Unchanged is the number of pages already stored as they are, and of
	// deletions of pages that were not loaded: nothing was written.
	Unchanged int64
	// Deleted is the number of pages removed.
	Deleted int64
	// Superseded is the number of records dropped because a later record of
	// the same URL in the same batch replaced them.
	Superseded int64
	// Skipped is the number of input records deliberately ignored:
	// non-response WARC records, non-HTML files… (counted only with
	// Options.Stats) and symbolic links met by input.Dir (reported as
	// Problems of kind Skipped). See Summary.SkipReasons.
	Skipped int64
	// Bad is the number of unusable records: rejected by a source (a
	// *input.BadRecord, except skipped symbolic links) or by the parser
	// (invalid URL, too large, not HTML).
	Bad int64
	// InputErrors is the number of sources that stopped early on a fatal
	// error (unreadable file, truncated gzip…); the records before the
	// error were loaded.
	InputErrors int64
	// Failed is the number of records whose transaction failed.
	Failed int64
	// Abandoned is the number of records read but neither loaded nor
	// failed because the context ended.
	Abandoned int64
}

// Processed is the number of records finished so far, whatever the outcome:
// what progress reports count against a known total.
func (c Counts) Processed() int64 {
	return c.Loaded + c.Replaced + c.Unchanged + c.Deleted + c.Superseded + c.Bad + c.Failed
}

// Stored is the number of records that reached the store (written or found
// already there).
func (c Counts) Stored() int64 {
	return c.Loaded + c.Replaced + c.Unchanged + c.Deleted
}

// Summary is what a run did.
type Summary struct {
	Counts
	// SkipReasons counts Skipped by reason: the input.Skip* keys, and
	// ReasonSymlink.
	SkipReasons map[string]int64
	// BadReasons counts Bad by Problem.Reason.
	BadReasons map[string]int64
	// Elapsed is the duration of the run.
	Elapsed time.Duration
}

// OK reports whether every record was loaded: no bad record, no failed
// transaction, no input cut short, nothing abandoned.
func (s *Summary) OK() bool {
	return s.Bad == 0 && s.Failed == 0 && s.InputErrors == 0 && s.Abandoned == 0
}

// PerSecond is the rate of processed records over the run.
func (s *Summary) PerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Processed()) / s.Elapsed.Seconds()
}

// Print writes the summary as aligned lines, one per counter.
func (s *Summary) Print(w io.Writer) error {
	var b strings.Builder
	line := func(name string, n int64, detail map[string]int64) {
		fmt.Fprintf(&b, "%-12s %d", name, n)
		if len(detail) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(detail)) {
				parts = append(parts, fmt.Sprintf("%s %d", k, detail[k]))
			}
			fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
		}
		b.WriteByte('\n')
	}
	line("read", s.Read, nil)
	line("loaded", s.Loaded, nil)
	line("replaced", s.Replaced, nil)
	line("unchanged", s.Unchanged, nil)
	line("deleted", s.Deleted, nil)
	line("superseded", s.Superseded, nil)
	line("skipped", s.Skipped, s.SkipReasons)
	line("bad", s.Bad, s.BadReasons)
	line("input errors", s.InputErrors, nil)
	line("failed", s.Failed, nil)
	if s.Abandoned > 0 {
		line("not loaded", s.Abandoned, nil)
	}
	fmt.Fprintf(&b, "%-12s %v\n", "elapsed", s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(&b, "%-12s %.1f\n", "pages/s", s.PerSecond())
	_, err := io.WriteString(w, b.String())
	return err
}

// ProblemKind classifies a Problem.
type ProblemKind int

// Problem kinds.
const (
	// BadRecord: one input record was unusable and was skipped.
	BadRecord ProblemKind = iota + 1
	// InputError: a source stopped early; its remaining records are lost.
	InputError
	// Failed: the transaction writing the record failed.
	Failed
	// Skipped: a record deliberately not loaded, reported so that the
	// omission is visible: a symbolic link input.Dir did not follow. It
	// does not make a run fail.
	Skipped
)

func (k ProblemKind) String() string {
	switch k {
	case BadRecord:
		return "bad record"
	case InputError:
		return "input error"
	case Failed:
		return "failed"
	case Skipped:
		return "skipped"
	}
	return fmt.Sprintf("ProblemKind(%d)", int(k))
}

// Reasons of bad records (Problem.Reason, Summary.BadReasons).
const (
	ReasonInvalidURL = "invalid-url" // not an absolute http(s) URL
	ReasonTooLarge   = "too-large"   // body over MaxBody
	ReasonNotHTML    = "not-html"    // binary body
	ReasonSymlink    = "symlink"     // Dir met a symbolic link (a Skipped problem)
	ReasonUnparsable = "unparsable"  // the HTML parser gave up
	ReasonBadInput   = "bad-input"   // any other record a source rejected
)

// Problem is one record (or source) the loader could not load.
type Problem struct {
	Kind ProblemKind
	// Reason classifies a BadRecord or a Skipped problem (the Reason*
	// constants); empty for other kinds.
	Reason string
	// Source, Offset and Line locate the record as input.Record does
	// (Offset -1 and Line 0 when unknown). An InputError has no Source:
	// the fatal errors of package input name the file and offset in Err.
	Source string
	Offset int64
	Line   int
	// URL is the record's URL, when known.
	URL string
	Err error
}

// Where formats Source, Line and Offset for messages.
func (p *Problem) Where() string {
	switch {
	case p.Line > 0:
		return fmt.Sprintf("%s:%d", p.Source, p.Line)
	case p.Offset >= 0:
		return fmt.Sprintf("%s@%d", p.Source, p.Offset)
	}
	return p.Source
}

func (p *Problem) String() string {
	s := p.Kind.String()
	if p.Reason != "" {
		s += " (" + p.Reason + ")"
	}
	if w := p.Where(); w != "" {
		s += ": " + w
	}
	if p.URL != "" {
		s += ": " + p.URL
	}
	return s + ": " + p.Err.Error()
}

// Log writes the problem to log: bad records and input errors as warnings,
// failures as errors.
func (p *Problem) Log(log *slog.Logger) {
	var attrs []any
	if p.Source != "" {
		attrs = append(attrs, "source", p.Source)
	}
	if p.Line > 0 {
		attrs = append(attrs, "line", p.Line)
	}
	if p.Offset >= 0 {
		attrs = append(attrs, "offset", p.Offset)
	}
	if p.URL != "" {
		attrs = append(attrs, "url", p.URL)
	}
	if p.Reason != "" {
		attrs = append(attrs, "reason", p.Reason)
	}
	attrs = append(attrs, "err", p.Err)
	switch p.Kind {
	case Failed:
		log.Error("page not loaded: transaction failed", attrs...)
	case InputError:
		log.Warn("input stopped early", attrs...)
	case Skipped:
		log.Warn("record skipped", attrs...)
	default:
		log.Warn("bad record skipped", attrs...)
	}
}

// badReason classifies the error of a bad record.
func badReason(err error) string {
	switch {
	case errors.Is(err, extract.ErrBadURL):
		return ReasonInvalidURL
	case errors.Is(err, input.ErrTooLarge), errors.Is(err, extract.ErrTooLarge):
		return ReasonTooLarge
	case errors.Is(err, extract.ErrNotHTML):
		return ReasonNotHTML
	case errors.Is(err, input.ErrSymlinkSkipped):
		return ReasonSymlink
	}
	return ""
}
