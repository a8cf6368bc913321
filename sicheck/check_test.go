package sicheck

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestCheck runs the hand-made histories of testdata/histories: each must
// be flagged with the anomalies written under it, or found valid. A
// history is one transaction a line:
//
//	<process>.<id> <ok|fail|info> <invoke> <complete|-> : <op>, <op>...
//
// with ops "append <key> <value>" and "read <key> [<values>]".
func TestCheck(t *testing.T) {
	datadriven.RunTest(t, "testdata/histories", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "history" {
			t.Fatalf("unknown command %q", d.Cmd)
		}
		h, err := parseHistory(d.Input)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		r := Check(h)
		if r.Valid() {
			return "valid\n"
		}
		var b strings.Builder
		for _, a := range r.Anomalies {
			b.WriteString(a.String() + "\n")
		}
		return b.String()
	})
}

func parseHistory(in string) (History, error) {
	var h History
	for n, line := range strings.Split(strings.TrimSpace(in), "\n") {
		head, ops, ok := strings.Cut(line, ":")
		f := strings.Fields(head)
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("line %d: want <p>.<id> <outcome> <invoke> <complete|->: ops", n+1)
		}
		var t Txn
		if _, err := fmt.Sscanf(f[0], "%d.%d", &t.Process, &t.ID); err != nil {
			return nil, fmt.Errorf("line %d: %q: %w", n+1, f[0], err)
		}
		t.Outcome = Outcome(f[1])
		var err error
		if t.Invoke, err = strconv.ParseInt(f[2], 10, 64); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if f[3] != "-" {
			if t.Complete, err = strconv.ParseInt(f[3], 10, 64); err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
		}
		for _, o := range strings.Split(ops, ",") {
			w := strings.Fields(strings.NewReplacer("[", " [ ", "]", " ] ").Replace(o))
			switch {
			case len(w) == 3 && w[0] == Append:
				v, err := strconv.ParseInt(w[2], 10, 64)
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", n+1, err)
				}
				t.Ops = append(t.Ops, Op{F: Append, Key: w[1], Value: v})
			case len(w) >= 4 && w[0] == Read && w[2] == "[" && w[len(w)-1] == "]":
				op := Op{F: Read, Key: w[1], List: []int64{}}
				for _, s := range w[3 : len(w)-1] {
					v, err := strconv.ParseInt(s, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("line %d: %w", n+1, err)
					}
					op.List = append(op.List, v)
				}
				t.Ops = append(t.Ops, op)
			default:
				return nil, fmt.Errorf("line %d: bad op %q", n+1, o)
			}
		}
		h = append(h, t)
	}
	return h, nil
}
