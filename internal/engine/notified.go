package engine

// NotifiedRow is a row that a commit left a notification in. Engines
// hand the rows of each commit to a hook (a runner's), so that its
// scanners look at them at once instead of at their next pass.
type NotifiedRow struct {
	Table string
	Row   []byte
	// Columns are the observed columns the commit notified in the row,
	// each once, so that a scanner told of them can run their observers
	// without first reading the row's notifications. Nil when they are
	// not known (the rows of another process's wake-up, which names rows
	// only): the scanner then reads the row's notifications to find them.
	Columns []Column
}

// MaxNotifiedRows is the most rows the hook is given for one commit;
// past it, it is given nil: a scanner told about that many rows might as
// well look everywhere.
const MaxNotifiedRows = 256

// Lease is a process's standing with the garbage collector: a collection
// keeps what the process's transactions read only while its lease holds
// (a runner's liveness token). Engines begin transactions only while it
// holds and fail one with ErrLeaseLost if it lapsed meanwhile.
type Lease interface {
	// Held returns the lease's term and whether the lease holds now. The
	// term changes whenever the lease was lost and taken again (a
	// liveness token that expired and was registered anew): a
	// transaction begun in an earlier term may have been passed.
	Held() (term uint64, ok bool)
}
