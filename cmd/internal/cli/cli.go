// Package cli holds the conventions the trickle commands share: flags that
// environment variables can set too (a bad value in either is an error
// naming it), help on request, and one prefix on every error.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Flags is a flag set whose flags may also come from environment
// variables. The command line wins over the environment.
type Flags struct {
	*flag.FlagSet
	env      map[string]string // flag name -> variable
	noEnv    map[string]bool   // flags exempt from a variable (NoEnv)
	lookup   func(string) (string, bool)
	applied  bool
	explicit map[string]bool
}

// New returns an empty flag set for the command name. Parse reports
// problems as errors instead of printing them, so that the command says
// them once, with its prefix.
func New(name string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &Flags{FlagSet: fs, env: map[string]string{}, noEnv: map[string]bool{}, lookup: os.LookupEnv, explicit: map[string]bool{}}
}

// Env binds the flag name to the environment variable v and names v in the
// flag's usage. The flag must be defined.
func (f *Flags) Env(name, v string) {
	fl := f.Lookup(name)
	if fl == nil {
		panic("cli: Env of undefined flag -" + name)
	}
	f.env[name] = v
	fl.Usage += " (" + v + ")"
}

// NoEnv records that the flag name has no environment variable, and says
// so in its usage: a flag naming the inputs or an action of one command
// line, which a variable left set would repeat in every later one. The
// flag must be defined.
func (f *Flags) NoEnv(name string) {
	fl := f.Lookup(name)
	if fl == nil {
		panic("cli: NoEnv of undefined flag -" + name)
	}
	f.noEnv[name] = true
	fl.Usage += " (no variable)"
}

// Unbound lists the flags that have neither an environment variable nor
// an exemption (NoEnv), sorted: a command's tests check that it has none.
func (f *Flags) Unbound() []string {
	var names []string
	f.VisitAll(func(fl *flag.Flag) {
		if f.env[fl.Name] == "" && !f.noEnv[fl.Name] {
			names = append(names, fl.Name)
		}
	})
	return names
}

// Exempt lists the flags NoEnv exempted from a variable, sorted.
func (f *Flags) Exempt() []string {
	var names []string
	f.VisitAll(func(fl *flag.Flag) {
		if f.noEnv[fl.Name] {
			names = append(names, fl.Name)
		}
	})
	return names
}

// SetLookup replaces os.LookupEnv, for tests.
func (f *Flags) SetLookup(lookup func(string) (string, bool)) { f.lookup = lookup }

// Parse sets the flags from their environment variables (once; an empty
// variable counts as unset), then from args. It returns flag.ErrHelp for
// -h or -help, and for a bad value an error naming the flag or the
// variable.
func (f *Flags) Parse(args []string) error {
	if !f.applied {
		f.applied = true
		for name, v := range f.env {
			val, ok := f.lookup(v)
			if !ok || strings.TrimSpace(val) == "" {
				continue
			}
			if err := f.Set(name, strings.TrimSpace(val)); err != nil {
				return fmt.Errorf("%s=%q: %v", v, val, err)
			}
			f.explicit[name] = true
		}
	}
	if err := f.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%v (see -help)", err)
	}
	f.Visit(func(fl *flag.Flag) { f.explicit[fl.Name] = true })
	return nil
}

// IsSet reports whether the flag was given on the command line or by its
// environment variable, as opposed to left at its default.
func (f *Flags) IsSet(name string) bool { return f.explicit[name] }

// PrintDefaults writes the flags and their usage to w.
func (f *Flags) PrintDefaults(w io.Writer) {
	f.SetOutput(w)
	f.FlagSet.PrintDefaults()
	f.SetOutput(io.Discard)
}

// Error formats err for the command prog with one "prog: " prefix, even if
// the error's own text already starts with it (errors of the package of
// the same name do).
func Error(prog string, err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, prog+": ") {
		return msg
	}
	return prog + ": " + msg
}
