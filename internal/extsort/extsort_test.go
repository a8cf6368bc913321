package extsort

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// randomRecords makes n records with keys drawn from few enough values
// that many repeat, some with the same value too.
func randomRecords(seed uint64, n int) []Record {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]Record, n)
	for i := range out {
		k := fmt.Appendf(nil, "k%05d", rng.IntN(n/3+1))
		v := fmt.Appendf(nil, "v%d", rng.IntN(4))
		if rng.IntN(10) == 0 {
			v = bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(300))
		}
		out[i] = Record{Key: k, Value: v}
	}
	return out
}

// sortedCopy is the order All must yield.
func sortedCopy(recs []Record) []Record {
	out := slices.Clone(recs)
	slices.SortFunc(out, func(a, b Record) int { return compare(a.Key, a.Value, b.Key, b.Value) })
	return out
}

// collect reads every record All yields, copied.
func collect(t *testing.T, ctx context.Context, s *Sorter) []Record {
	t.Helper()
	var out []Record
	for r, err := range s.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Record{Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)})
	}
	return out
}

func equalRecords(a, b []Record) bool {
	return slices.EqualFunc(a, b, func(x, y Record) bool {
		return bytes.Equal(x.Key, y.Key) && bytes.Equal(x.Value, y.Value)
	})
}

func sortAll(t *testing.T, opts *Options, recs []Record) *Sorter {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, r := range recs {
		if err := s.Add(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// Records that fit the budget are sorted in memory: no run, no directory.
func TestSortInMemory(t *testing.T) {
	dir := t.TempDir()
	recs := randomRecords(1, 2000)
	s := sortAll(t, &Options{Dir: dir}, recs)
	if got := collect(t, context.Background(), s); !equalRecords(got, sortedCopy(recs)) {
		t.Fatal("in-memory sort: wrong order")
	}
	if st := s.Stats(); st.Spills != 0 || st.Runs != 0 || st.Records != 2000 {
		t.Fatalf("stats %+v, want no spill", st)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("an in-memory sort wrote %d entries", len(ents))
	}
}

// With a budget of a few records, the sort spills hundreds of runs,
// merges them in several passes (a fan-in of 3), and yields exactly the
// records added, duplicates included, in order, every time it is read.
func TestSortManyRuns(t *testing.T) {
	dir := t.TempDir()
	recs := randomRecords(2, 5000)
	s := sortAll(t, &Options{Dir: dir, MemoryBytes: 512, MaxFanIn: 3, ReadBuffer: 16, WriteBuffer: 16}, recs)
	st := s.Stats()
	if st.Spills < 100 || st.Merges == 0 || st.Runs > 3 || st.Runs < 2 {
		t.Fatalf("stats %+v: want hundreds of spills, merges, and at most 3 runs left", st)
	}
	want := sortedCopy(recs)
	for i := range 2 {
		if got := collect(t, context.Background(), s); !equalRecords(got, want) {
			t.Fatalf("reading %d: %d records, want %d, or out of order", i, len(got), len(want))
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("Close left %d entries", len(ents))
	}
}

// A record larger than the budget is buffered alone, then sorted with the
// rest.
func TestSortRecordLargerThanTheBudget(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 10_000)
	recs := []Record{{Key: []byte("b"), Value: big}, {Key: []byte("a")}, {Key: []byte("c"), Value: big}, {Key: []byte("b")}}
	s := sortAll(t, &Options{Dir: t.TempDir(), MemoryBytes: 100}, recs)
	if got := collect(t, context.Background(), s); !equalRecords(got, sortedCopy(recs)) {
		t.Fatal("wrong order")
	}
	if st := s.Stats(); st.Spills != 4 {
		t.Fatalf("stats %+v, want a run per record", st)
	}
}

// An empty sort yields nothing, with or without a spill.
func TestSortEmpty(t *testing.T) {
	s := sortAll(t, nil, nil)
	if got := collect(t, context.Background(), s); len(got) != 0 {
		t.Fatalf("%d records from an empty sort", len(got))
	}
}

// A spill directory that cannot be made fails the Add that spills; runs
// that disappear fail the read, which says so.
func TestSortSpillErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(&Options{Dir: file, MemoryBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	var addErr error
	for i := 0; i < 100 && addErr == nil; i++ {
		addErr = s.Add(fmt.Appendf(nil, "key %d", i), []byte("value"))
	}
	if addErr == nil {
		t.Fatal("no error spilling into a file's path")
	}

	recs := randomRecords(3, 300)
	s = sortAll(t, &Options{Dir: t.TempDir(), MemoryBytes: 256}, recs)
	if err := os.RemoveAll(s.dir); err != nil {
		t.Fatal(err)
	}
	var readErr error
	for _, err := range s.All(context.Background()) {
		readErr = err
	}
	if readErr == nil || !errors.Is(readErr, os.ErrNotExist) {
		t.Fatalf("reading removed runs: %v", readErr)
	}
}

// A truncated run is an error, not a short result.
func TestSortTruncatedRun(t *testing.T) {
	s := sortAll(t, &Options{Dir: t.TempDir(), MemoryBytes: 256}, randomRecords(4, 300))
	fi, err := os.Stat(s.runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(s.runs[0], fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	var readErr error
	for _, err := range s.All(context.Background()) {
		readErr = err
	}
	if readErr == nil {
		t.Fatal("a truncated run read without error")
	}
}

// A cancelled context stops a read, from runs or from memory, and a
// merge pass.
func TestSortCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, opts := range map[string]*Options{"memory": nil, "runs": {Dir: t.TempDir(), MemoryBytes: 256}} {
		s := sortAll(t, opts, randomRecords(5, 3000))
		var n int
		var readErr error
		for _, err := range s.All(ctx) {
			n++
			readErr = err
		}
		if !errors.Is(readErr, context.Canceled) || n != 1 {
			t.Errorf("%s: cancelled read yielded %d, ending with %v", name, n, readErr)
		}
	}
	s, err := New(&Options{Dir: t.TempDir(), MemoryBytes: 256, MaxFanIn: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, r := range randomRecords(6, 3000) {
		if err := s.Add(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Finish with merges to do, cancelled: %v", err)
	}
}

// A sorter refuses records once finished, and reads before it is.
func TestSortFinished(t *testing.T) {
	s, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range s.All(context.Background()) {
		if !errors.Is(err, ErrFinished) {
			t.Fatalf("All before Finish: %v", err)
		}
	}
	if err := s.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Add([]byte("k"), nil); !errors.Is(err, ErrFinished) {
		t.Fatalf("Add after Finish: %v", err)
	}
	if _, err := New(&Options{MaxFanIn: 1}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("MaxFanIn 1: %v", err)
	}
}

// Keys that share their first 8 bytes, or differ only by trailing NULs,
// sort bytewise, in memory and through runs.
func TestSortKeysWithEqualPrefixes(t *testing.T) {
	keys := []string{"abcdefgh2", "ab", "ab\x00", "abcdefgh", "ab\x00\x00", "abcdefgh\x00", "abcdefgh1", "", "\x00", "abcdefgi", "abcdefgh10", "b"}
	var recs []Record
	for i := range 50 {
		recs = append(recs, Record{Key: []byte(keys[i%len(keys)]), Value: fmt.Appendf(nil, "%d", i%3)})
	}
	for _, memory := range []int64{0, 64} {
		s := sortAll(t, &Options{Dir: t.TempDir(), MemoryBytes: memory}, recs)
		if got := collect(t, context.Background(), s); !equalRecords(got, sortedCopy(recs)) {
			t.Fatalf("budget %d: wrong order", memory)
		}
	}
}
