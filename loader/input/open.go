package input

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"iter"
	"path/filepath"
	"strings"
)

// Format is the kind of a stream input, as detected by Open.
type Format int

const (
	// FormatUnknown means neither content nor name identified the format.
	FormatUnknown Format = iota
	// FormatWARC is a WARC file, possibly gzip-compressed.
	FormatWARC
	// FormatJSONL is a JSON Lines file, possibly gzip-compressed.
	FormatJSONL
)

// String names the format for messages.
func (f Format) String() string {
	switch f {
	case FormatWARC:
		return "warc"
	case FormatJSONL:
		return "jsonl"
	}
	return "unknown"
}

// Open opens path ("-" for stdin) and detects its format so that a loader
// can accept any input file without flags. Content wins over the name:
// after gzip decompression of the first bytes (if the file is gzip), a
// stream starting with "WARC/1." is WARC and one starting with '{' is JSONL.
// Otherwise the name decides: .warc is WARC; .jsonl, .json and .ndjson are
// JSONL (each optionally followed by .gz). The returned reader yields the
// file from its first byte (still compressed: WARCReader and JSONL
// decompress themselves). Closing it does not close stdin.
func Open(path string) (io.ReadCloser, Format, error) {
	rc, err := openPath(path)
	if err != nil {
		return nil, FormatUnknown, err
	}
	br := bufio.NewReaderSize(rc, 64<<10)
	head, _ := br.Peek(4096)
	f := sniff(head)
	if f == FormatUnknown {
		f = formatByName(path)
	}
	return struct {
		io.Reader
		io.Closer
	}{br, rc}, f, nil
}

func sniff(head []byte) Format {
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(head))
		if err != nil {
			return FormatUnknown
		}
		buf := make([]byte, 512)
		n, _ := io.ReadFull(zr, buf)
		head = buf[:n]
	}
	head = bytes.TrimLeft(head, " \t\r\n")
	switch {
	case bytes.HasPrefix(head, []byte("WARC/1.")):
		return FormatWARC
	case bytes.HasPrefix(head, []byte("{")):
		return FormatJSONL
	}
	return FormatUnknown
}

func formatByName(path string) Format {
	name := strings.TrimSuffix(strings.ToLower(filepath.Base(path)), ".gz")
	switch filepath.Ext(name) {
	case ".warc":
		return FormatWARC
	case ".jsonl", ".json", ".ndjson":
		return FormatJSONL
	}
	return FormatUnknown
}

// File opens path ("-" for stdin), detects its format with Open and yields
// its records with WARCReader or JSONL. An unopenable file or an unknown
// format is a fatal error.
func File(path string, opts Options) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		e := emitter{stats: opts.Stats, yield: yield}
		rc, f, err := Open(path)
		if err != nil {
			e.fatal(err)
			return
		}
		defer rc.Close()
		switch f {
		case FormatWARC:
			readWARC(path, rc, opts, e)
		case FormatJSONL:
			readJSONL(path, rc, opts, e)
		default:
			e.fatal(&unknownFormatError{path})
		}
	}
}

type unknownFormatError struct{ path string }

func (u *unknownFormatError) Error() string {
	return "input: " + u.path + ": unknown format (want WARC or JSON Lines, by content or by a .warc/.jsonl/.json/.ndjson name, optionally .gz)"
}
