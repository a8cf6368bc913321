package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The loader takes the store flags: a TiKV store it cannot use is a fatal
// error naming the flag, and it never falls back to the data directory.
func TestStoreFlagErrors(t *testing.T) {
	t.Setenv("TRICKLE_NATS_URL", "")
	in := filepath.Join(t.TempDir(), "pages.jsonl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-store", "mysql://x", "-jsonl", in}, "-store (TRICKLE_STORE)"},
		{[]string{"-store", "tikv://127.0.0.1:1", "-jsonl", in}, "-nats"},
	} {
		code, _, errOut := load(t, tc.args...)
		if code != exitFatal || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, exitFatal, tc.want)
		}
	}
}
