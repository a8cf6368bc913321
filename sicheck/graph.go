package sicheck

import (
	"slices"
	"sort"
)

// edge labels, as bits: a pair of transactions may depend on each other
// in several ways at once.
const (
	ww = 1 << iota
	wr
	rw
	rt
)

var labelNames = map[int]string{ww: "ww", wr: "wr", rw: "rw", rt: "rt"}

// graph is the dependency graph of the committed transactions: for each
// pair, the labels of its edges and, for the data edges, a key each.
type graph struct {
	out  map[int]map[int]int // from -> to -> labels
	keys map[[2]int]map[int]string
}

func (g *graph) add(from, to, label int, key string, r *Report) {
	if from == to {
		return
	}
	m := g.out[from]
	if m == nil {
		m = map[int]int{}
		g.out[from] = m
	}
	if m[to]&label == 0 {
		r.Edges[labelNames[label]]++
	}
	m[to] |= label
	if key != "" {
		k := [2]int{from, to}
		if g.keys[k] == nil {
			g.keys[k] = map[int]string{}
		}
		if _, ok := g.keys[k][label]; !ok {
			g.keys[k][label] = key
		}
	}
}

// buildGraph derives the ww, wr and rw edges from the version orders and
// the rt edges from the times the clients saw.
func (c *checker) buildGraph() *graph {
	g := &graph{out: map[int]map[int]int{}, keys: map[[2]int]map[int]string{}}
	writerAt := func(key string, i int) (int, bool) {
		w, ok := c.writer[kv{key, c.order[key][i]}]
		return w, ok && c.committed[w]
	}
	for key, o := range c.order {
		for i := 1; i < len(o); i++ {
			a, okA := writerAt(key, i-1)
			b, okB := writerAt(key, i)
			if okA && okB {
				g.add(a, b, ww, key, c.r)
			}
		}
	}
	c.reads(func(t int, op *Op) {
		o := c.order[op.Key]
		if len(op.List) > len(o) || !slices.Equal(o[:len(op.List)], op.List) {
			return // incompatible: reported already
		}
		if n := len(op.List); n > 0 {
			if w, ok := writerAt(op.Key, n-1); ok {
				g.add(w, t, wr, op.Key, c.r)
			}
		}
		if n := len(op.List); n < len(o) {
			if w, ok := writerAt(op.Key, n); ok {
				g.add(t, w, rw, op.Key, c.r)
			}
		}
	})
	c.realtime(g)
	return g
}

// realtime adds the rt edges: T1 -> T2 when T1 completed before T2 was
// invoked, transitively reduced as Elle does. Events are taken in time
// order, invocations before completions at one instant; a frontier holds
// the completed transactions no later completion has covered: an
// invocation depends on each of them, and a completion replaces those its
// own invocation depended on.
func (c *checker) realtime(g *graph) {
	type ev struct {
		t      int64
		invoke bool
		txn    int
	}
	var evs []ev
	for i := range c.h {
		if !c.committed[i] {
			continue
		}
		evs = append(evs, ev{c.h[i].Invoke, true, i})
		if c.h[i].Complete != 0 {
			evs = append(evs, ev{c.h[i].Complete, false, i})
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return evs[i].invoke && !evs[j].invoke
	})
	frontier := map[int]bool{}
	preds := map[int][]int{}
	for _, e := range evs {
		if e.invoke {
			for f := range frontier {
				g.add(f, e.txn, rt, "", c.r)
				preds[e.txn] = append(preds[e.txn], f)
			}
			continue
		}
		for _, p := range preds[e.txn] {
			delete(frontier, p)
		}
		delete(preds, e.txn)
		frontier[e.txn] = true
	}
}

// cycles finds the cycles snapshot isolation forbids: those without two
// adjacent rw edges (the last edge of a cycle is adjacent to its first).
// They are the cycles of a graph whose states are (transaction, whether
// the edge into it was rw), in which an rw edge may not follow an rw
// edge; each strongly connected part of it with a cycle yields one.
func (c *checker) cycles() {
	g := c.buildGraph()
	nodes := make([]int, 0, len(g.out))
	for n := range g.out {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	// State s is 2*node + (1 if the edge into it was rw).
	succ := func(s int) []int {
		node, afterRW := s/2, s%2 == 1
		var out []int
		tos := make([]int, 0, len(g.out[node]))
		for to := range g.out[node] {
			tos = append(tos, to)
		}
		slices.Sort(tos)
		for _, to := range tos {
			l := g.out[node][to]
			if l&^rw != 0 {
				out = append(out, 2*to)
			}
			if l&rw != 0 && !afterRW {
				out = append(out, 2*to+1)
			}
		}
		return out
	}
	var states []int
	for _, n := range nodes {
		states = append(states, 2*n, 2*n+1)
	}
	found := 0
	for _, scc := range tarjan(states, succ) {
		if found == MaxCycles {
			break
		}
		in := map[int]bool{}
		for _, s := range scc {
			in[s] = true
		}
		cyc := cycleIn(scc[0], in, succ)
		if cyc == nil {
			continue
		}
		found++
		c.r.Anomalies = append(c.r.Anomalies, c.describe(g, cyc))
	}
}

// cycleIn returns a cycle through start within the states in (a strongly
// connected part), found breadth first, or nil if start has none there.
func cycleIn(start int, in map[int]bool, succ func(int) []int) []int {
	prev := map[int]int{}
	queue := []int{start}
	seen := map[int]bool{}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, n := range succ(s) {
			if !in[n] {
				continue
			}
			if n == start {
				path := []int{s}
				for p := s; p != start; {
					p = prev[p]
					path = append(path, p)
				}
				slices.Reverse(path)
				return path
			}
			if !seen[n] {
				seen[n] = true
				prev[n] = s
				queue = append(queue, n)
			}
		}
	}
	return nil
}

// describe turns a cycle of states into an anomaly: its transactions, the
// edge into each (rw where the state says so, else the first other label
// of the pair) and its kind.
func (c *checker) describe(g *graph, states []int) Anomaly {
	a := Anomaly{}
	n := len(states)
	kinds := map[string]int{}
	for i, s := range states {
		a.Cycle = append(a.Cycle, &c.h[s/2])
		from := states[(i+n-1)%n] / 2
		l := g.out[from][s/2]
		label := rw
		if s%2 == 0 {
			for _, b := range []int{ww, wr, rt} {
				if l&b != 0 {
					label = b
					break
				}
			}
		}
		a.Edges = append(a.Edges, Edge{Kind: labelNames[label], Key: g.keys[[2]int{from, s / 2}][label]})
		kinds[labelNames[label]]++
	}
	switch {
	case kinds["rw"] == 1:
		a.Kind = "G-single"
	case kinds["rw"] > 1:
		a.Kind = "G-nonadjacent"
	case kinds["wr"] > 0:
		a.Kind = "G1c"
	case kinds["ww"] > 0:
		a.Kind = "G0"
	default:
		a.Kind = "G-realtime" // rt alone cannot cycle; kept for clarity
	}
	if kinds["rt"] > 0 && a.Kind != "G-realtime" {
		a.Kind += "-realtime"
	}
	a.Detail = "a cycle snapshot isolation forbids"
	return a
}

// tarjan returns the strongly connected components of the graph over
// states with successors succ that contain a cycle (more than one state,
// or a state that is its own successor), iteratively, so that long chains
// of transactions do not exhaust the stack.
func tarjan(states []int, succ func(int) []int) [][]int {
	index := map[int]int{}
	low := map[int]int{}
	onStack := map[int]bool{}
	var stack []int
	var out [][]int
	next := 0
	type frame struct {
		s    int
		succ []int
		i    int
	}
	for _, root := range states {
		if _, done := index[root]; done {
			continue
		}
		work := []frame{{s: root, succ: succ(root)}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(work) > 0 {
			f := &work[len(work)-1]
			if f.i < len(f.succ) {
				n := f.succ[f.i]
				f.i++
				if _, seen := index[n]; !seen {
					index[n], low[n] = next, next
					next++
					stack = append(stack, n)
					onStack[n] = true
					work = append(work, frame{s: n, succ: succ(n)})
				} else if onStack[n] {
					low[f.s] = min(low[f.s], index[n])
				}
				continue
			}
			s := f.s
			work = work[:len(work)-1]
			if len(work) > 0 {
				p := work[len(work)-1].s
				low[p] = min(low[p], low[s])
			}
			if low[s] != index[s] {
				continue
			}
			var comp []int
			for {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[top] = false
				comp = append(comp, top)
				if top == s {
					break
				}
			}
			if len(comp) > 1 || slices.Contains(succ(s), s) {
				slices.Sort(comp)
				out = append(out, comp)
			}
		}
	}
	return out
}
