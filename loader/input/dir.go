package input

import (
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Dir yields every regular file under root whose name ends in .html or .htm
// (any case), in lexical walk order so that runs are reproducible. Each
// file's URL is baseURL, exactly one '/', then the file's slash-separated path
// relative to root with every segment percent-encoded (so names containing
// spaces, '#' or '?' still give valid URLs). Record.Offset is -1.
//
// The encoding is exact (each byte of a name that is not safe in a path
// segment becomes its %XX escape; '%' itself becomes %25), so the URL names
// the file and nothing else, but it is not the index's canonical spelling:
// the loader passes every record URL through extract.Normalize, which maps
// the file "operator=.html" or "a b.html" to the same key as the links
// "operator%3D.html" or "a%20b.html" that resolve to it.
//
// Symbolic links are never followed (they could loop or leave root); each
// one met during the walk, whatever its name or target, is yielded as a
// *BadRecord wrapping ErrSymlinkSkipped. root itself may be a symlink.
// Other files are counted in Stats.Skipped (SkipNonHTMLFile,
// SkipNonRegularFile). A file that cannot be read, or is larger than
// MaxBody, is a *BadRecord; an unreadable subdirectory is a *BadRecord and is
// skipped. A bad baseURL (not absolute http/https, or with a query or
// fragment) or an unreadable root is a fatal error.
func Dir(root, baseURL string, opts Options) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		e := emitter{stats: opts.Stats, yield: yield}
		prefix, err := urlPrefix(baseURL)
		if err != nil {
			e.fatal(err)
			return
		}
		walkRoot := root
		if fi, err := os.Lstat(root); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if walkRoot, err = filepath.EvalSymlinks(root); err != nil {
				e.fatal(fmt.Errorf("input: %s: %w", root, err))
				return
			}
		}
		if fi, err := os.Stat(walkRoot); err != nil {
			e.fatal(fmt.Errorf("input: %w", err))
			return
		} else if !fi.IsDir() {
			e.fatal(fmt.Errorf("input: %s: not a directory", root))
			return
		}
		maxBody := opts.maxBody()
		stopped := false
		err = filepath.WalkDir(walkRoot, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if path == walkRoot {
					return err
				}
				if !e.bad(&BadRecord{Source: path, Offset: -1, Err: err}) {
					stopped = true
					return fs.SkipAll
				}
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			mode := d.Type()
			switch {
			case mode.IsDir():
				return nil
			case mode&fs.ModeSymlink != 0:
				if !e.bad(&BadRecord{Source: path, Offset: -1, Err: ErrSymlinkSkipped}) {
					stopped = true
					return fs.SkipAll
				}
				return nil
			case !mode.IsRegular():
				e.skip(SkipNonRegularFile)
				return nil
			}
			ext := strings.ToLower(filepath.Ext(path))
			if ext != ".html" && ext != ".htm" {
				e.skip(SkipNonHTMLFile)
				return nil
			}
			rel, err := filepath.Rel(walkRoot, path)
			if err != nil {
				return err // cannot happen: path is under walkRoot
			}
			body, err := readFileLimited(path, maxBody)
			if err != nil {
				if !e.bad(&BadRecord{Source: path, Offset: -1, Err: err}) {
					stopped = true
					return fs.SkipAll
				}
				return nil
			}
			rec := Record{URL: prefix + escapePath(filepath.ToSlash(rel)), Body: body, Source: path, Offset: -1}
			if !e.record(rec) {
				stopped = true
				return fs.SkipAll
			}
			return nil
		})
		if err != nil && !stopped {
			e.fatal(fmt.Errorf("input: %s: %w", root, err))
		}
	}
}

// urlPrefix validates baseURL and returns it with exactly one trailing '/'.
func urlPrefix(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", fmt.Errorf("input: bad base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("input: bad base URL %q: want an absolute http or https URL", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(baseURL, "?#") {
		return "", fmt.Errorf("input: bad base URL %q: must not have a query or fragment", baseURL)
	}
	return strings.TrimRight(baseURL, "/") + "/", nil
}

// escapePath percent-encodes each segment of a slash-separated path.
func escapePath(rel string) string {
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// readFileLimited reads a whole file, refusing files over max bytes without
// reading them (and guarding against files that grow while read).
func readFileLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, fi.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	return b, nil
}
