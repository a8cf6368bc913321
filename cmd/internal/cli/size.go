package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// SizeVar defines a flag holding a byte count with an optional k, m or g
// suffix, whose default is value, as flag.Int64Var does.
func (f *Flags) SizeVar(p *int64, name string, value int64, usage string) {
	*p = value
	f.Var(sizeValue{p}, name, usage)
}

// sizeValue is a byte count with an optional k, m or g suffix (powers of
// 1024).
type sizeValue struct{ n *int64 }

// String formats the count as it would be written: with the largest
// suffix that divides it (1m, not 1048576), so that -help shows defaults
// the way the documentation writes them.
func (f sizeValue) String() string {
	if f.n == nil {
		return ""
	}
	return formatSize(*f.n)
}

// formatSize writes n with the largest of the g, m and k suffixes that
// divides it, parseSize's inverse.
func formatSize(n int64) string {
	if n > 0 {
		for _, u := range []struct {
			suffix string
			mult   int64
		}{{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
			if n%u.mult == 0 {
				return strconv.FormatInt(n/u.mult, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

func (f sizeValue) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

// parseSize reads a positive byte count with an optional k, m or g
// suffix (powers of 1024; a trailing b or ib is allowed: 10MiB).
func parseSize(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "b"), "i")
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with a k, m or g suffix", v)
	}
	return n * mult, nil
}
