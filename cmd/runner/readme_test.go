package main

import (
	"os"
	"strings"
	"testing"
)

// The README's first commands say that their first run compiles for a
// while before printing anything, so that a new user does not take the
// silence for a hang.
func TestReadmeWarnsOfTheFirstCompile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Two commands")
	if !ok {
		t.Fatal(`the README has no "Two commands" section`)
	}
	intro, _, _ := strings.Cut(section, "go run ./cmd/runner demo")
	if !strings.Contains(strings.Join(strings.Fields(intro), " "), "compiles for about two minutes") {
		t.Errorf("the README does not say, before the demo command, that its first run compiles for minutes:\n%s", intro)
	}
}
