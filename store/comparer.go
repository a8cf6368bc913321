package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/keys"
)

// comparerName names the store's key order in pebble's on-disk metadata.
// Pebble refuses to open a database with a comparer of another name, so it
// must change whenever the order or the Split of keys changes.
const comparerName = "trickle.store.ColumnSplit.v1"

// ErrIncompatible is returned by Open when the directory holds a pebble
// database written with a different key comparer (e.g. by a version of the
// store that did not split keys into column and timestamp, or by a program
// that is not this store). Such a database cannot be read by this store.
var ErrIncompatible = errors.New("store: incompatible database format")

// comparer orders keys bytewise, exactly like pebble.DefaultComparer, but
// tells pebble where the timestamp suffix of a key starts (see keys.Split):
// every version of a column shares one prefix. With it, pebble's bloom
// filters hold column prefixes, and Iterator.SeekPrefixGE and DB.Get skip
// every sstable that has no version of the column.
//
// Bytewise order is kept because keys.Split is total and agrees with it:
// comparing any two byte strings as (prefix, suffix) pairs, each bytewise,
// gives bytes.Compare of the strings. So Compare and Equal can stay
// bytes.Compare and bytes.Equal, the suffixes (inverted big-endian
// timestamps, empty for non-column keys) compare bytewise, and pebble's
// default Separator and Successor, which may cut keys anywhere, still yield
// keys whose split order is their byte order.
var comparer = newComparer()

func newComparer() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Split = keys.Split
	c.Compare = bytes.Compare
	c.Equal = bytes.Equal
	c.ComparePointSuffixes = bytes.Compare
	c.CompareRangeSuffixes = bytes.Compare
	c.ImmediateSuccessor = immediateSuccessor
	c.Name = comparerName
	return &c
}

// immediateSuccessor appends the smallest prefix key (a key that Split
// leaves whole) above the prefix key a. Every key extending a column prefix
// has that column as its prefix, so the successor of a column prefix (which
// ends with the terminator 0x00 0x01) is the same bytes ending with 0x00 0x02;
// any other prefix key is followed by itself plus a zero byte. Pebble needs
// this only for range keys, which the store does not write.
func immediateSuccessor(dst, a []byte) []byte {
	if keys.IsColumnPrefix(a) {
		dst = append(dst, a...)
		dst[len(dst)-1]++
		return dst
	}
	return append(append(dst, a...), 0x00)
}

// storedComparer returns the comparer name recorded in the newest OPTIONS
// file of the pebble database in dir, or "" if there is none or it cannot be
// read.
func storedComparer(fs vfs.FS, dir string) string {
	desc, err := pebble.Peek(dir, fs)
	if err != nil || desc.OptionsFilename == "" {
		return ""
	}
	f, err := fs.Open(desc.OptionsFilename)
	if err != nil {
		return ""
	}
	defer f.Close()
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if v, ok := strings.CutPrefix(line, "comparer="); ok && section == "[Options]" {
			return v
		}
	}
	return ""
}

// explainOpenError turns pebble's refusal to open a database written with
// another comparer into ErrIncompatible.
func explainOpenError(fs vfs.FS, dir string, err error) error {
	if name := storedComparer(fs, dir); name != "" && name != comparerName {
		return fmt.Errorf("%w: %q was written with key comparer %q, but this store needs %q (the data must be migrated): %v",
			ErrIncompatible, dir, name, comparerName, err)
	}
	return fmt.Errorf("store: opening %q: %w", dir, err)
}
