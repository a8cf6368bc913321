package main

import (
	"os"
	"strings"
	"testing"
)

// Every flag of every command has an environment variable, as docs/running.md
// says, unless it is one of the exemptions it names: the flags
// that say what one command line does.
func TestEveryFlagHasAVariable(t *testing.T) {
	var o options
	fs := newFlags(&o)
	if unbound := fs.Unbound(); len(unbound) > 0 {
		t.Errorf("flags with no variable and no exemption: %q", unbound)
	}
	doc, err := os.ReadFile("../../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	exemptions := exemptionsParagraph(t, string(doc))
	for _, name := range fs.Exempt() {
		if !strings.Contains(exemptions, "`-"+name+"`") {
			t.Errorf("-%s has no variable, but docs/running.md does not say so among the exemptions:\n%s", name, exemptions)
		}
	}
}

// exemptionsParagraph returns docs/running.md's sentences on the flags that
// have no variable.
func exemptionsParagraph(t *testing.T, doc string) string {
	t.Helper()
	const lead = "that say what one command line does have no variable"
	i := strings.Index(doc, lead)
	if i < 0 {
		t.Fatalf("docs/running.md does not say which flags have no variable (%q)", lead)
	}
	p, _, _ := strings.Cut(doc[i:], "\n\n")
	return p
}
