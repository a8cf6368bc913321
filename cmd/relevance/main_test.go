package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Help, asked for in any of the usual ways, lists the commands and every
// flag on stdout and exits 0.
func TestHelpListsFlags(t *testing.T) {
	for _, args := range [][]string{{"-help"}, {"-h"}, {"help"}, {"run", "-help"}, {"fetch", "-h"}} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		if code != 0 {
			t.Errorf("%v: exit %d, want 0; stderr %q", args, code, errb.String())
		}
		for _, want := range []string{"commands:", "  -dir", "  -api", "  -v"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, out.String())
			}
		}
	}
}

// A command line it cannot read exits 1 with one line saying why.
func TestBadCommandLines(t *testing.T) {
	for want, args := range map[string][]string{
		`unknown command "bogus"`:                 {"bogus"},
		"flag provided but not defined: -no-such": {"run", "-no-such"},
		"name at least one set":                   {"run"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 1 || !strings.Contains(errb.String(), want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", args, code, errb.String(), want)
		}
	}
}
