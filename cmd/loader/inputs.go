package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// checkInputs checks that every input names something the loader can
// read, before anything opens the store: a mistyped path (or "loader
// help") is a usage error that leaves no data directory behind, not a
// load cut short.
func checkInputs(inputs []inputSpec) error {
	for _, in := range inputs {
		if in.path == "-" && in.kind != kindDir {
			continue
		}
		if err := checkInput(in); err != nil {
			return err
		}
	}
	return nil
}

// checkInput checks one input: a directory for -dir, a readable file for
// the others.
func checkInput(in inputSpec) error {
	name := "input"
	if in.kind != kindAny {
		name = "--" + string(in.kind)
	}
	fi, err := os.Stat(in.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: no such file or directory (loader -help lists the flags and inputs)", name, in.path)
	case err != nil:
		return fmt.Errorf("%s %s: %w", name, in.path, err)
	case in.kind == kindDir && !fi.IsDir():
		return fmt.Errorf("%s %s: not a directory (files go in --warc, --jsonl or as FILE arguments)", name, in.path)
	case in.kind == kindDir:
		return nil
	case fi.IsDir():
		return fmt.Errorf("%s %s: is a directory (load a directory's pages with --dir and --base-url)", name, in.path)
	}
	f, err := os.Open(in.path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, in.path, err)
	}
	return f.Close()
}
