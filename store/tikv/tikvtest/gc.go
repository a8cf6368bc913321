package tikvtest

import (
	"math"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
)

// gcChunk is how many live keys a step of collect covers: the mock holds
// the mutex every request of the cluster takes for the whole of a step.
const gcChunk = 512

// collect drops the versions no snapshot at or above sp reads, unless a
// collection at sp or above ran. It goes a chunk of keys at a time, so
// that requests are served between the steps as TiKV serves them beside
// its collection. The mock refuses a chunk while a lock below sp stands
// in it (a transaction the collection passed that is still prewriting):
// the next collection tries again.
func (c *Cluster) collect(sp uint64) {
	c.gc.Lock()
	defer c.gc.Unlock()
	if sp <= c.collected {
		return
	}
	whole := true
	c.cpu.measure(func() {
		var start []byte
		for {
			live := c.mvcc.Scan(start, nil, gcChunk, math.MaxUint64, kvrpcpb.IsolationLevel_RC, nil)
			var end []byte
			if len(live) == gcChunk {
				last := live[len(live)-1].Key
				end = append(last[:len(last):len(last)], 0)
			}
			if err := c.mvcc.GC(start, end, sp); err != nil {
				whole = false
			}
			if end == nil {
				return
			}
			start = end
		}
	})
	if whole {
		c.collected = sp
	}
}
