package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// span is what the console trace exporter prints of a span.
type span struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Links       []struct {
		SpanContext struct{ TraceID, SpanID string }
	}
	Attributes []struct {
		Key   string
		Value struct{ Value any }
	}
	StartTime, EndTime time.Time
}

func (s span) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return fmt.Sprint(a.Value.Value)
		}
	}
	return ""
}

// spansIn parses the JSON span lines of a process's output, skipping the
// rest (the loader prints its summary there too).
func spansIn(t *testing.T, out []byte) []span {
	var spans []span
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if !bytes.HasPrefix(sc.Bytes(), []byte(`{"Name"`)) {
			continue
		}
		var s span
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("span line: %v", err)
		}
		spans = append(spans, s)
	}
	return spans
}

// TestTraceAcrossProcesses loads one page with the loader binary into a
// runner process, the loader printing its spans on stderr and the runner
// into a file (-traces file:PATH), neither on stdout, and checks that the page
// is one trace across the two processes: the loader's batch, its
// transaction, the page observer that transaction triggered, and the link
// inversion and cluster observers that one triggered in turn.
func TestTraceAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts processes")
	}
	dir, port := t.TempDir(), freePort(t)
	loaderBin := filepath.Join(t.TempDir(), "loader")
	if out, err := exec.Command("go", "build", "-o", loaderBin, "github.com/trickle-dev/trickle/cmd/loader").CombinedOutput(); err != nil {
		t.Fatalf("building the loader: %v\n%s", err, out)
	}
	var runnerOut bytes.Buffer
	traceFile := filepath.Join(t.TempDir(), "runner-spans.jsonl")
	run := exec.Command(os.Args[0], "-data", dir, "-nats-port", fmt.Sprint(port), "-http", "off", "-log-level", "warn", "-traces", "file:"+traceFile)
	run.Env = append(os.Environ(), "TRICKLE_TEST_RUNNER=1")
	run.Stdout, run.Stderr = &runnerOut, os.Stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()

	pages := filepath.Join(t.TempDir(), "pages.jsonl")
	jsonl := `{"url":"http://a.example/","html":"<title>A</title>about <a href=\"http://b.example/\">bee</a>"}` + "\n" +
		`{"url":"http://b.example/","html":"<title>B</title>bees"}` + "\n"
	if err := os.WriteFile(pages, []byte(jsonl), 0o644); err != nil {
		t.Fatal(err)
	}
	var loaderOut []byte
	for deadline := time.Now().Add(30 * time.Second); ; { // until the runner serves
		load := exec.Command(loaderBin, "-jsonl", pages, "-data", dir, "-nats-port", fmt.Sprint(port), "-mode", "client", "-log-level", "warn")
		load.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=console")
		var stdout, stderr bytes.Buffer
		load.Stdout, load.Stderr = &stdout, &stderr
		err := load.Run()
		loaderOut = stderr.Bytes()
		if err == nil {
			if bytes.Contains(stdout.Bytes(), []byte(`{"Name"`)) {
				t.Fatalf("the loader's console spans went to its stdout:\n%s", stdout.Bytes())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loader: %v\n%s", err, loaderOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	wait := exec.Command(os.Args[0], "wait", "-data", dir, "-nats-port", fmt.Sprint(port), "-timeout", "1m", "-log-level", "warn")
	wait.Env = append(os.Environ(), "TRICKLE_TEST_RUNNER=1")
	if out, err := wait.CombinedOutput(); err != nil {
		t.Fatalf("runner wait: %v\n%s", err, out)
	}
	run.Process.Signal(syscall.SIGTERM) // a clean stop flushes the exporter
	if err := run.Wait(); err != nil {
		t.Fatalf("runner: %v", err)
	}

	if bytes.Contains(runnerOut.Bytes(), []byte(`{"Name"`)) {
		t.Errorf("the runner's spans went to its stdout")
	}
	runnerSpansOut, err := os.ReadFile(traceFile)
	if err != nil {
		t.Fatal(err)
	}
	loaderSpans, runnerSpans := spansIn(t, loaderOut), spansIn(t, runnerSpansOut)
	// The trace of page a, the one with a link: the trace of its page
	// observer run, which must start at a loader batch.
	var traceID string
	for _, s := range runnerSpans {
		if s.Name == "observer webindex-page" && s.attr("trickle.row") == "http://a.example/" {
			traceID = s.SpanContext.TraceID
		}
	}
	var batch *span
	for i, s := range loaderSpans {
		if s.Name == "loader batch" && s.SpanContext.TraceID == traceID {
			batch = &loaderSpans[i]
		}
	}
	if batch == nil {
		t.Fatalf("the page observer of http://a.example/ (trace %q) is in no trace of the loader's %d spans", traceID, len(loaderSpans))
	}
	byID := map[string]span{}
	var trace []span
	for _, s := range append(loaderSpans, runnerSpans...) {
		if s.SpanContext.TraceID == batch.SpanContext.TraceID {
			byID[s.SpanContext.SpanID] = s
			trace = append(trace, s)
		}
	}
	// Every hop of the chain, with its parent.
	parentName := func(s span) string { return byID[s.Parent.SpanID].Name }
	want := map[string]string{
		"observer webindex-page":     "txn",
		"observer webindex-outlinks": "txn",
		"observer webindex-cluster":  "txn",
	}
	seen := map[string]bool{}
	for _, s := range trace {
		if p, ok := want[s.Name]; ok {
			seen[s.Name] = true
			if parentName(s) != p {
				t.Errorf("%s (row %s) has parent %q, want %q", s.Name, s.attr("trickle.row"), parentName(s), p)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("the loader's trace has no %s span", name)
		}
	}
	// The page observer's transaction descends from the loader's batch.
	for _, s := range trace {
		if s.Name != "observer webindex-page" {
			continue
		}
		for p := s; p.Parent.SpanID != ""; p = byID[p.Parent.SpanID] {
			if p.Parent.SpanID == batch.SpanContext.SpanID {
				goto found
			}
			if _, ok := byID[p.Parent.SpanID]; !ok {
				break
			}
		}
		t.Errorf("observer webindex-page (row %s) does not descend from the loader batch", s.attr("trickle.row"))
	found:
	}
	t.Logf("one trace, %d spans, %d from the runner process:\n%s", len(trace), len(trace)-countIn(loaderSpans, batch.SpanContext.TraceID), tree(trace))
}

func countIn(spans []span, traceID string) int {
	n := 0
	for _, s := range spans {
		if s.SpanContext.TraceID == traceID {
			n++
		}
	}
	return n
}

// tree renders spans as an indented tree, children by start time.
func tree(spans []span) string {
	children := map[string][]span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID] = true
	}
	var roots []span
	for _, s := range spans {
		if ids[s.Parent.SpanID] {
			children[s.Parent.SpanID] = append(children[s.Parent.SpanID], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var walk func(s span, depth int)
	walk = func(s span, depth int) {
		fmt.Fprintf(&b, "%s%s [%v]", strings.Repeat("  ", depth), s.Name, s.EndTime.Sub(s.StartTime).Round(10*time.Microsecond))
		for _, k := range []string{"trickle.row", "trickle.outcome", "trickle.txn.writes", "trickle.loader.pages"} {
			if v := s.attr(k); v != "" {
				fmt.Fprintf(&b, " %s=%s", strings.TrimPrefix(strings.TrimPrefix(k, "trickle."), "txn."), v)
			}
		}
		if len(s.Links) > 1 {
			fmt.Fprintf(&b, " links=%d", len(s.Links))
		}
		b.WriteByte('\n')
		cs := children[s.SpanContext.SpanID]
		slices.SortFunc(cs, func(a, b span) int { return a.StartTime.Compare(b.StartTime) })
		for _, c := range cs {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}
