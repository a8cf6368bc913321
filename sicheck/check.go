package sicheck

import (
	"fmt"
	"slices"
	"strings"
)

// Anomaly is one way the history is not snapshot isolation.
type Anomaly struct {
	// Kind names it: G0, G1c, G-single, G-nonadjacent (each with
	// "-realtime" when real time closes the cycle), G1a, G1b,
	// incompatible-order, internal, duplicate-elements, garbage-read,
	// lost-append, duplicate-append.
	Kind string
	// Cycle is the cycle of a G* kind but G1a and G1b: Cycle[i] depends on
	// Cycle[i-1] (and Cycle[0] on the last) by Edges[i].
	Cycle []*Txn
	Edges []Edge
	// Detail says what was found, with the transactions involved.
	Detail string
}

// Edge is a dependency between two transactions of a cycle.
type Edge struct {
	Kind string // "ww", "wr", "rw" or "rt"
	Key  string // the key of a ww, wr or rw edge
}

func (a Anomaly) String() string {
	if len(a.Cycle) == 0 {
		return a.Kind + ": " + a.Detail
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", a.Kind)
	for i, t := range a.Cycle {
		e := a.Edges[(i+1)%len(a.Cycle)]
		label := e.Kind
		if e.Key != "" {
			label += "(" + e.Key + ")"
		}
		fmt.Fprintf(&b, "%s -%s-> ", t, label)
	}
	b.WriteString(a.Cycle[0].String())
	return b.String()
}

// Report is what Check found.
type Report struct {
	Txns, OK, Failed, Unknown int
	// Committed counts the transactions taken as committed: the OK ones
	// and the Info ones whose appends were read.
	Committed int
	// Edges counts the dependencies found, by kind.
	Edges     map[string]int
	Anomalies []Anomaly
}

// Valid reports whether no anomaly was found.
func (r *Report) Valid() bool { return len(r.Anomalies) == 0 }

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d transactions: %d ok, %d failed, %d unknown (%d taken as committed); edges: ww %d, wr %d, rw %d, rt %d; ",
		r.Txns, r.OK, r.Failed, r.Unknown, r.Committed, r.Edges["ww"], r.Edges["wr"], r.Edges["rw"], r.Edges["rt"])
	if r.Valid() {
		b.WriteString("valid")
		return b.String()
	}
	fmt.Fprintf(&b, "%d anomalies", len(r.Anomalies))
	for i, a := range r.Anomalies {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  ... and %d more", len(r.Anomalies)-maxListed)
			break
		}
		b.WriteString("\n  " + a.String())
	}
	return b.String()
}

// maxListed bounds the anomalies a Report's String lists.
const maxListed = 20

// MaxCycles bounds the cycles a Report lists: one per strongly connected
// part of the dependency graph, at most this many.
const MaxCycles = 16

// Check analyzes a list-append history (see the package doc).
func Check(h History) *Report {
	c := &checker{h: h, r: &Report{Txns: len(h), Edges: map[string]int{}}, writer: map[kv]int{}, committed: make([]bool, len(h))}
	for i := range h {
		switch h[i].Outcome {
		case OK:
			c.r.OK++
		case Fail:
			c.r.Failed++
		default:
			c.r.Unknown++
		}
	}
	c.indexAppends()
	c.versionOrders()
	c.readAnomalies()
	c.internal()
	c.lostAppends()
	c.cycles()
	return c.r
}

type kv struct {
	key string
	v   int64
}

type checker struct {
	h History
	r *Report
	// writer maps an appended value to the transaction that appended it.
	writer map[kv]int
	// order is each key's version order: the longest list read.
	order map[string][]int64
	// pos is each value's index in its key's order.
	pos       map[kv]int
	committed []bool
}

func (c *checker) anomaly(kind, format string, args ...any) {
	c.r.Anomalies = append(c.r.Anomalies, Anomaly{Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// reads calls fn with every read of an OK transaction.
func (c *checker) reads(fn func(t int, op *Op)) {
	for i := range c.h {
		if c.h[i].Outcome != OK {
			continue
		}
		for j := range c.h[i].Ops {
			if op := &c.h[i].Ops[j]; op.F == Read {
				fn(i, op)
			}
		}
	}
}

func (c *checker) indexAppends() {
	for i := range c.h {
		for _, op := range c.h[i].Ops {
			if op.F != Append {
				continue
			}
			k := kv{op.Key, op.Value}
			if j, dup := c.writer[k]; dup && j != i {
				c.anomaly("duplicate-append", "%s and %s both append %d to %s: the workload must append unique values", &c.h[j], &c.h[i], op.Value, op.Key)
				continue
			}
			c.writer[k] = i
		}
	}
}

// versionOrders takes each key's longest read as its order, checks that
// every read is a prefix of it, and marks the transactions whose appends
// it holds as committed.
func (c *checker) versionOrders() {
	c.order, c.pos = map[string][]int64{}, map[kv]int{}
	c.reads(func(t int, op *Op) {
		if len(op.List) > len(c.order[op.Key]) {
			c.order[op.Key] = op.List
		}
	})
	c.reads(func(t int, op *Op) {
		seen := map[int64]bool{}
		for _, v := range op.List {
			if seen[v] {
				c.anomaly("duplicate-elements", "%s read %s with %d twice", &c.h[t], op.Key, v)
				break
			}
			seen[v] = true
		}
		if o := c.order[op.Key]; !slices.Equal(o[:len(op.List)], op.List) {
			c.anomaly("incompatible-order", "%s read %s as %s, which is not a prefix of %s", &c.h[t], op.Key, listString(op.List), listString(o))
		}
	})
	for i := range c.h {
		c.committed[i] = c.h[i].Outcome == OK
	}
	for key, o := range c.order {
		for i, v := range o {
			c.pos[kv{key, v}] = i
			if w, ok := c.writer[kv{key, v}]; ok && c.h[w].Outcome == Info {
				c.committed[w] = true
			}
		}
	}
	for i := range c.h {
		if c.committed[i] {
			c.r.Committed++
		}
	}
}

// readAnomalies finds reads of values nobody appended (garbage), that an
// aborted transaction appended (G1a), or that a transaction appended
// before its last append to the key (G1b).
func (c *checker) readAnomalies() {
	c.reads(func(t int, op *Op) {
		for i, v := range op.List {
			w, ok := c.writer[kv{op.Key, v}]
			switch {
			case !ok:
				c.anomaly("garbage-read", "%s read %d in %s, which no transaction appended", &c.h[t], v, op.Key)
			case c.h[w].Outcome == Fail:
				c.anomaly("G1a", "%s read %d in %s, appended by %s, which aborted", &c.h[t], v, op.Key, &c.h[w])
			case i == len(op.List)-1 && w != t && c.appendsAfter(w, op.Key, v):
				c.anomaly("G1b", "%s read %s up to %d, an intermediate append of %s", &c.h[t], op.Key, v, &c.h[w])
			}
		}
	})
}

// appendsAfter reports whether transaction w appended to key after v.
func (c *checker) appendsAfter(w int, key string, v int64) bool {
	after := false
	for _, op := range c.h[w].Ops {
		if op.F == Append && op.Key == key {
			if after {
				return true
			}
			after = op.Value == v
		}
	}
	return false
}

// internal checks that each OK transaction reads its own appends: a read
// of a key it appended to since its previous read of it returns that read
// with its appends after it; a first read ends with the appends before it.
func (c *checker) internal() {
	for i := range c.h {
		t := &c.h[i]
		if t.Outcome != OK {
			continue
		}
		last := map[string][]int64{} // the list as the transaction knows it
		known := map[string]bool{}   // last[key] was read, not just appended to
		for _, op := range t.Ops {
			switch op.F {
			case Append:
				last[op.Key] = append(slices.Clone(last[op.Key]), op.Value)
			case Read:
				want, ok := last[op.Key]
				switch {
				case known[op.Key] && !slices.Equal(op.List, want):
					c.anomaly("internal", "%s read %s as %s, expected %s from its earlier read and its appends", t, op.Key, listString(op.List), listString(want))
				case !known[op.Key] && ok && (len(op.List) < len(want) || !slices.Equal(op.List[len(op.List)-len(want):], want)):
					c.anomaly("internal", "%s read %s as %s, which does not end with its own appends %s", t, op.Key, listString(op.List), listString(want))
				}
				last[op.Key], known[op.Key] = op.List, true
			}
		}
	}
}

// lostAppends finds a committed append no read shows though a read of its
// key began after the appending transaction completed. (An append that
// some read shows is in the version order, and such a read would close a
// cycle with it.)
func (c *checker) lostAppends() {
	for w := range c.h {
		t := &c.h[w]
		if t.Outcome != OK {
			continue
		}
		for _, op := range t.Ops {
			if op.F != Append {
				continue
			}
			if _, ordered := c.pos[kv{op.Key, op.Value}]; ordered {
				continue
			}
			found := false
			c.reads(func(r int, read *Op) {
				if !found && read.Key == op.Key && c.h[r].Invoke > t.Complete && r != w {
					found = true
					c.anomaly("lost-append", "%s appended %d to %s and completed before %s began, which read %s", t, op.Value, op.Key, &c.h[r], listString(read.List))
				}
			})
		}
	}
}
