package tikvtest

// collect drops the versions no snapshot at or above sp reads, unless a
// collection at sp or above ran. The mock refuses while a lock below sp
// stands (a transaction the collection passed that is still prewriting):
// the next collection tries again.
func (c *Cluster) collect(sp uint64) {
	c.gc.Lock()
	defer c.gc.Unlock()
	if sp <= c.collected {
		return
	}
	var err error
	c.cpu.measure(func() { err = c.mvcc.GC(nil, nil, sp) })
	if err == nil {
		c.collected = sp
	}
}
