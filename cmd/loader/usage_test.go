package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A usage error (a mistyped input, "loader help") exits 1 naming what was
// wrong, and creates no data directory: the loader checks its arguments
// and inputs before it opens the store.
func TestUsageErrorsTouchNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"help as a word", []string{"help"}, "input help: no such file"},
		{"missing file", []string{"missing.warc"}, "input missing.warc: no such file"},
		{"missing warc", []string{"--warc", "gone.warc.gz"}, "--warc gone.warc.gz: no such file"},
		{"missing jsonl", []string{"--jsonl", "gone.jsonl"}, "--jsonl gone.jsonl: no such file"},
		{"missing dir", []string{"--dir", "site", "--base-url", "http://x.example/"}, "--dir site: no such file"},
		{"file as dir", []string{"--dir", "page.html", "--base-url", "http://x.example/"}, "--dir page.html: not a directory"},
		{"dir as file", []string{"pages"}, "input pages: is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wd := t.TempDir()
			writeFile(t, filepath.Join(wd, "page.html"), page("P"))
			writeFile(t, filepath.Join(wd, "pages", "a.html"), page("A"))
			cmd := exec.Command(os.Args[0], tc.args...)
			cmd.Dir = wd
			cmd.Env = append(os.Environ(), "TRICKLE_TEST_LOADER=1", "TRICKLE_DATA_DIR=", "GORACE=atexit_sleep_ms=0")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitFatal {
				t.Fatalf("loader %v: %v, want exit %d; output:\n%s", tc.args, err, exitFatal, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("loader %v: output does not say %q:\n%s", tc.args, tc.want, out)
			}
			if _, err := os.Stat(filepath.Join(wd, "data")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("loader %v created ./data (%v)", tc.args, err)
			}
		})
	}
}
