package main

import (
	"os"
	"strings"
	"testing"
)

// Every loader flag has an environment variable, as docs/running.md
// says, unless it is one of the exemptions it names: the inputs and the
// one-off takeover of a dead bulk load.
func TestEveryFlagHasAVariable(t *testing.T) {
	var cfg config
	fs := newFlagSet(&cfg)
	if unbound := fs.Unbound(); len(unbound) > 0 {
		t.Errorf("flags with no variable and no exemption: %q", unbound)
	}
	doc, err := os.ReadFile("../../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	const lead = "that say what one command line does have no variable"
	i := strings.Index(string(doc), lead)
	if i < 0 {
		t.Fatalf("docs/running.md does not say which flags have no variable (%q)", lead)
	}
	exemptions, _, _ := strings.Cut(string(doc)[i:], "\n\n")
	for _, name := range fs.Exempt() {
		if !strings.Contains(exemptions, "`-"+name+"`") {
			t.Errorf("-%s has no variable, but docs/running.md does not say so among the exemptions:\n%s", name, exemptions)
		}
	}
}
