package main

import (
	"os"
	"strings"
	"testing"
)

// Every flag of every command has an environment variable, as the README
// says, unless it is one of the exemptions the README names: the flags
// that say what one command line does.
func TestEveryFlagHasAVariable(t *testing.T) {
	var o options
	fs := newFlags(&o)
	if unbound := fs.Unbound(); len(unbound) > 0 {
		t.Errorf("flags with no variable and no exemption: %q", unbound)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	exemptions := exemptionsParagraph(t, string(readme))
	for _, name := range fs.Exempt() {
		if !strings.Contains(exemptions, "`-"+name+"`") {
			t.Errorf("-%s has no variable, but the README does not say so among the exemptions:\n%s", name, exemptions)
		}
	}
}

// exemptionsParagraph returns the README's sentences on the flags that
// have no variable.
func exemptionsParagraph(t *testing.T, readme string) string {
	t.Helper()
	const lead = "that say what one command line does have no variable"
	i := strings.Index(readme, lead)
	if i < 0 {
		t.Fatalf("the README does not say which flags have no variable (%q)", lead)
	}
	p, _, _ := strings.Cut(readme[i:], "\n\n")
	return p
}
