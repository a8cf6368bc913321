package loader

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
)

// ErrBulkTooLarge is wrapped by the error of a bulk load whose pages
// exceed Options.BulkMaxBytes: it stopped before writing anything.
var ErrBulkTooLarge = errors.New("loader: too many pages for a bulk load in this memory")

// bulkMemoryFactor is how many times the size of its pages' bodies a bulk
// load's process holds at its peak: the records, the parsed pages, the
// computed index and the sstables being written. Measured on Debian's
// cppreference pages: 46 MB of HTML, 730 MB peak resident set (16×).
const bulkMemoryFactor = 16

// fallbackMemory is the memory assumed where the machine's cannot be read.
const fallbackMemory = 16 << 30

// DefaultBulkMaxBytes is the default of Options.BulkMaxBytes: the memory
// this process may use (the machine's, or its control group's limit if
// lower; 16 GiB if neither can be read) divided by the peak a bulk load
// needs per byte of page (16×, measured).
func DefaultBulkMaxBytes() int64 {
	return processMemory() / bulkMemoryFactor
}

// processMemory returns the memory this process may use: MemTotal of
// /proc/meminfo, capped by a cgroup v2 memory.max.
func processMemory() int64 {
	mem := int64(fallbackMemory)
	if total, ok := memTotal(); ok {
		mem = total
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil && n > 0 && n < mem {
			mem = n // "max" (no limit) does not parse
		}
	}
	return mem
}

// memTotal reads MemTotal from /proc/meminfo.
func memTotal() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil || kb <= 0 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
