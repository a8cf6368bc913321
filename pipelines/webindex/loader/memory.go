package loader

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// maxBulkMemory is the most DefaultBulkMemory gives a bulk load: past
// it, a larger budget buys fewer merge passes, not a different result.
const maxBulkMemory = 2 << 30

// minBulkMemory is the least Options.BulkMemory Validate accepts.
const minBulkMemory = 256 << 10

// fallbackMemory is the memory assumed where the machine's cannot be read.
const fallbackMemory = 16 << 30

// DefaultBulkMemory is the default of Options.BulkMemory: a quarter of
// the memory this process may use (the machine's, or its control
// group's limit if lower; 16 GiB if neither can be read), and at most
// 2 GiB. A quarter leaves the machine to whatever else runs on it: a
// bulk load is as correct in any budget, only slower in a small one.
func DefaultBulkMemory() int64 {
	return min(processMemory()/4, maxBulkMemory)
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
