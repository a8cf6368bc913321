package tikvtest

import (
	"runtime"
	"sync/atomic"
	"time"
)

// serverCPU measures the CPU the mock cluster spends serving requests.
// The mock serves a request in the goroutine that sends it, so the CPU
// time of that goroutine's thread across the call is the server's: what a
// real cluster would spend on its own machines. Background work of the
// mock's storage (its compactions) runs elsewhere and is not counted.
type serverCPU struct {
	on    bool
	spent atomic.Int64 // nanoseconds
}

// measure runs serve, adding the thread CPU time it took to the total
// when measuring is on.
func (s *serverCPU) measure(serve func()) {
	if !s.on {
		serve()
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, ok := threadCPU()
	serve()
	if after, ok2 := threadCPU(); ok && ok2 {
		s.spent.Add(int64(after - before))
	}
}

// ServerCPU returns the CPU time the mock cluster spent serving requests,
// when Options.MeasureServerCPU is set (0 otherwise): a benchmark
// subtracts it from the process's CPU to tell the client's cost from the
// cluster's.
func (c *Cluster) ServerCPU() time.Duration { return time.Duration(c.cpu.spent.Load()) }
