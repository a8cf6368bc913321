package sicheck

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// Op is one operation of a transaction: an append of Value to the list at
// Key, or a read of it (List, once the transaction completed).
type Op struct {
	// F is "append" or "read".
	F     string `json:"f"`
	Key   string `json:"k"`
	Value int64  `json:"v,omitempty"`
	// List is what a read returned, nil before the transaction completed
	// or if it did not.
	List []int64 `json:"l,omitempty"`
}

// Op kinds.
const (
	Append = "append"
	Read   = "read"
)

func (o Op) String() string {
	if o.F == Append {
		return fmt.Sprintf("append %s %d", o.Key, o.Value)
	}
	if o.List == nil {
		return fmt.Sprintf("read %s", o.Key)
	}
	return fmt.Sprintf("read %s %s", o.Key, listString(o.List))
}

// listString renders a list, its middle elided past a dozen values.
func listString(l []int64) string {
	if len(l) <= 12 {
		return fmt.Sprint(l)
	}
	head := strings.Trim(fmt.Sprint(l[:4]), "[]")
	tail := strings.Trim(fmt.Sprint(l[len(l)-4:]), "[]")
	return fmt.Sprintf("[%s ...%d more... %s]", head, len(l)-8, tail)
}

// Outcome is what a transaction's client learned of it.
type Outcome string

// Outcomes.
const (
	// OK: committed, and its reads returned what Ops say.
	OK Outcome = "ok"
	// Fail: certainly did not commit (a conflict, an error before the
	// commit, a refusal).
	Fail Outcome = "fail"
	// Info: may or may not have committed (its commit's answer was lost,
	// or its client died).
	Info Outcome = "info"
)

// Txn is one transaction of a history.
type Txn struct {
	// Process is the client that ran it, ID its number in that client.
	Process int `json:"p"`
	ID      int `json:"id"`
	Outcome Outcome
	Ops     []Op
	// Invoke and Complete are when the client began it and learned its
	// outcome, in Unix nanoseconds of one clock (all clients on one
	// machine, or clocks in step); Complete is 0 for an Info transaction.
	Invoke, Complete int64
}

func (t *Txn) String() string {
	return fmt.Sprintf("T%d.%d(%s)%v", t.Process, t.ID, t.Outcome, t.Ops)
}

// History is a set of transactions, in any order.
type History []Txn

// event is one line of a recorded history: a transaction invoked, or
// completed with its outcome (the completed ops carry what reads
// returned).
type event struct {
	Type    string `json:"type"` // "invoke", or an Outcome
	Process int    `json:"p"`
	ID      int    `json:"id"`
	Time    int64  `json:"t"`
	Ops     []Op   `json:"ops"`
}

// Recorder writes a client's history as it happens, one JSON line per
// event, so that what a killed client did survives it: a transaction it
// invoked and never completed reads back as Info. It is safe for
// concurrent use.
type Recorder struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewRecorder returns a Recorder writing to w. An unbuffered *os.File
// keeps every event the process wrote when it is killed.
func NewRecorder(w io.Writer) *Recorder { return &Recorder{w: w} }

func (r *Recorder) write(e event) {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // only plain data
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		_, r.err = r.w.Write(append(b, '\n'))
	}
}

// Invoke records that process p began transaction id with ops at time t.
func (r *Recorder) Invoke(p, id int, t int64, ops []Op) {
	r.write(event{Type: "invoke", Process: p, ID: id, Time: t, Ops: ops})
}

// Complete records the outcome of transaction id of process p at time t,
// with its ops as completed (reads with their lists).
func (r *Recorder) Complete(p, id int, t int64, out Outcome, ops []Op) {
	r.write(event{Type: string(out), Process: p, ID: id, Time: t, Ops: ops})
}

// Err returns the first error writing the history met.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// ReadHistory reads recorded histories (of one client or several,
// concatenated): each transaction is its invoke and its completion, if
// any. A torn last line (a client killed mid-write) is ignored; any other
// line that does not decode is an error naming it.
func ReadHistory(r io.Reader) (History, error) {
	type key struct{ p, id int }
	txns := map[key]*Txn{}
	var order []key
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	var pendingErr error
	for sc.Scan() {
		line++
		if pendingErr != nil {
			return nil, pendingErr // a bad line that was not the last
		}
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			pendingErr = fmt.Errorf("sicheck: history line %d: %w", line, err)
			continue
		}
		k := key{e.Process, e.ID}
		t := txns[k]
		switch e.Type {
		case "invoke":
			if t != nil {
				return nil, fmt.Errorf("sicheck: history line %d: transaction %d.%d invoked twice", line, e.Process, e.ID)
			}
			txns[k] = &Txn{Process: e.Process, ID: e.ID, Outcome: Info, Ops: e.Ops, Invoke: e.Time}
			order = append(order, k)
		case string(OK), string(Fail), string(Info):
			if t == nil {
				return nil, fmt.Errorf("sicheck: history line %d: transaction %d.%d completed but never invoked", line, e.Process, e.ID)
			}
			t.Outcome, t.Ops = Outcome(e.Type), e.Ops
			if t.Outcome != Info {
				t.Complete = e.Time
			}
		default:
			return nil, fmt.Errorf("sicheck: history line %d: unknown event %q", line, e.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sicheck: reading history: %w", err)
	}
	h := make(History, 0, len(order))
	for _, k := range order {
		h = append(h, *txns[k])
	}
	sort.SliceStable(h, func(i, j int) bool { return h[i].Invoke < h[j].Invoke })
	return h, nil
}

// errNoHistory is returned by Check for an empty history.
var errNoHistory = errors.New("sicheck: empty history")
