package input

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
)

// jsonlOverhead is how much longer than MaxBody a JSONL line may be: room
// for the URL, the keys and JSON escaping of a body that is itself within
// MaxBody.
const jsonlOverhead = 64 << 10

// jsonlLine is the schema of one JSONL line. Pointers distinguish a missing
// key from a zero value.
type jsonlLine struct {
	URL    *string `json:"url"`
	HTML   *string `json:"html"`
	Delete *bool   `json:"delete"`
}

// JSONL reads JSON Lines from r, one object per line: {"url":…,"html":…}
// to upsert a page or {"url":…,"delete":true} to delete one. Unknown keys are
// ignored. Blank lines are skipped. A line that is not a JSON object, lacks a
// url, or has both or neither of html and delete (or "delete": false) is a
// *BadRecord with its line number, and reading continues on the next line.
//
// Lines may be up to Options.MaxBody plus 64 KiB long (the decoded html must
// also fit in MaxBody); longer lines are reported as too large without being
// held in memory. Gzip-compressed input is detected and decompressed, in
// which case offsets are in the decompressed stream. A read error is fatal.
// name is used only in Record.Source and error messages.
func JSONL(name string, r io.Reader, opts Options) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		readJSONL(name, r, opts, emitter{stats: opts.Stats, yield: yield})
	}
}

func readJSONL(name string, r io.Reader, opts Options, e emitter) {
	src, _, err := maybeGunzip(r)
	if err != nil {
		e.fatal(fmt.Errorf("input: %s: offset 0: %w", name, err))
		return
	}
	p := newPosReader(src)
	maxBody := opts.maxBody()
	maxLine := maxBody + jsonlOverhead
	if maxLine > int64(^uint(0)>>2) {
		maxLine = int64(^uint(0) >> 2)
	}
	for lineNo := 1; ; lineNo++ {
		start := p.pos
		line, long, err := p.readLine(int(maxLine))
		if err == io.EOF {
			return
		}
		if err != nil {
			e.fatal(fmt.Errorf("input: %s: line %d (offset %d): %w", name, lineNo, start, err))
			return
		}
		bad := func(err error) bool {
			return e.bad(&BadRecord{Source: name, Offset: start, Line: lineNo, Err: err})
		}
		if long {
			if !bad(fmt.Errorf("%w: line longer than %d bytes", ErrTooLarge, maxLine)) {
				return
			}
			continue
		}
		if isBlank(line) {
			continue
		}
		rec, err := parseJSONLLine(line, maxBody)
		if err != nil {
			if !bad(err) {
				return
			}
			continue
		}
		rec.Source, rec.Offset, rec.Line = name, start, lineNo
		if !e.record(rec) {
			return
		}
	}
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

func parseJSONLLine(line []byte, maxBody int64) (Record, error) {
	var l jsonlLine
	if err := json.Unmarshal(line, &l); err != nil {
		return Record{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if l.URL == nil || *l.URL == "" {
		return Record{}, errors.New("missing url")
	}
	switch {
	case l.HTML != nil && l.Delete != nil:
		return Record{}, errors.New(`both "html" and "delete" given`)
	case l.HTML == nil && l.Delete == nil:
		return Record{}, errors.New(`neither "html" nor "delete" given`)
	case l.Delete != nil && !*l.Delete:
		return Record{}, errors.New(`"delete" must be true when given`)
	case l.Delete != nil:
		return Record{URL: *l.URL, Delete: true}, nil
	}
	if int64(len(*l.HTML)) > maxBody {
		return Record{}, fmt.Errorf("%w: html is %d bytes, limit %d", ErrTooLarge, len(*l.HTML), maxBody)
	}
	return Record{URL: *l.URL, Body: []byte(*l.HTML)}, nil
}
