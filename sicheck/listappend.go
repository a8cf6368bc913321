package sicheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/store"
)

// ListAppendOptions configure a list-append client. The zero value is
// usable: EnsureDefaults fills in every field left unset.
type ListAppendOptions struct {
	// Process numbers the client: it names the client's transactions in
	// the history and makes its appended values unique. Default: 0.
	Process int
	// Keys is how many keys transactions pick from: fewer keys, more
	// conflicts. Default: 8.
	Keys int
	// RotateEvery moves the clients (all of them: it follows the wall
	// clock) to fresh keys this often, so that lists stay short however
	// long a soak runs: every append rewrites its list. 0 never moves.
	// Default: 0.
	RotateEvery time.Duration
	// MaxOps bounds the operations of a transaction (each has 1 to
	// MaxOps). Default: 4.
	MaxOps int
	// Table holds the lists, one row a key. Default: "sicheck".
	Table string
	// Seed seeds the client's choices; 0 picks one at random.
	// Default: 0.
	Seed uint64
	// Unknown, if set, says that an error of Update leaves the outcome
	// unknown where the client would take it as a failure (a crash
	// injected in a test after the commit point, say). Errors other than
	// the ones that certainly mean "not committed" (a conflict, a refusal
	// below the safe point, no commit timestamp, a read that failed
	// before the commit) are unknown anyway. Default: none.
	Unknown func(error) bool
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *ListAppendOptions) EnsureDefaults() *ListAppendOptions {
	if o.Keys == 0 {
		o.Keys = 8
	}
	if o.MaxOps == 0 {
		o.MaxOps = 4
	}
	if o.Table == "" {
		o.Table = "sicheck"
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	return o
}

// ErrInvalidOptions is wrapped by the errors Validate returns.
var ErrInvalidOptions = errors.New("sicheck: invalid options")

// Validate reports the first unusable field.
func (o *ListAppendOptions) Validate() error {
	switch {
	case o.Process < 0 || o.Process >= 1<<20:
		return fmt.Errorf("%w: Process %d out of 0..%d", ErrInvalidOptions, o.Process, 1<<20-1)
	case o.Keys < 1:
		return fmt.Errorf("%w: Keys %d, want at least 1", ErrInvalidOptions, o.Keys)
	case o.MaxOps < 1:
		return fmt.Errorf("%w: MaxOps %d, want at least 1", ErrInvalidOptions, o.MaxOps)
	case o.RotateEvery < 0:
		return fmt.Errorf("%w: RotateEvery %v is negative", ErrInvalidOptions, o.RotateEvery)
	}
	return nil
}

// listColumn holds a key's list: its values in decimal, comma-separated.
var listColumn = framework.Column{Family: "list", Qualifier: "v"}

// ListAppend runs list-append transactions on a DB and records them. It
// is not safe for concurrent use: run one per goroutine, with distinct
// Process numbers.
type ListAppend struct {
	db   *framework.DB
	rec  *Recorder
	opts ListAppendOptions
	rng  *rand.Rand
	next int // the next transaction's ID
	seq  int64
	used map[string]bool // every key the client touched, for ReadAll
	// err is what the last transaction's Update returned.
	err error
}

// Err returns what the last transaction's Update returned: nil if it
// committed, else why not (or why its outcome is unknown).
func (w *ListAppend) Err() error { return w.err }

// NewListAppend returns a client of db that records its transactions in
// rec. opts may be nil.
func NewListAppend(db *framework.DB, rec *Recorder, opts *ListAppendOptions) (*ListAppend, error) {
	var o ListAppendOptions
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &ListAppend{db: db, rec: rec, opts: o, rng: rand.New(rand.NewPCG(o.Seed, uint64(o.Process))), used: map[string]bool{}}, nil
}

// key returns the name of key i of the keys in use now.
func (w *ListAppend) key(i int) string {
	if w.opts.RotateEvery > 0 {
		i += int(time.Now().UnixNano()/int64(w.opts.RotateEvery)) * w.opts.Keys
	}
	k := "k" + strconv.Itoa(i)
	w.used[k] = true
	return k
}

// Step runs one random transaction and returns its outcome.
func (w *ListAppend) Step(ctx context.Context) Outcome {
	n := 1 + w.rng.IntN(w.opts.MaxOps)
	ops := make([]Op, n)
	for i := range ops {
		k := w.key(w.rng.IntN(w.opts.Keys))
		if w.rng.IntN(2) == 0 {
			ops[i] = Op{F: Read, Key: k}
			continue
		}
		w.seq++
		ops[i] = Op{F: Append, Key: k, Value: int64(w.opts.Process)<<40 | w.seq}
	}
	return w.Run(ctx, ops)
}

// ReadAll runs a transaction that reads every key the client touched and
// those in use now: run last, after the faults, it shows where every
// committed append went.
func (w *ListAppend) ReadAll(ctx context.Context) Outcome {
	for i := range w.opts.Keys {
		w.key(i)
	}
	keys := make([]string, 0, len(w.used))
	for k := range w.used {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ops := make([]Op, len(keys))
	for i, k := range keys {
		ops[i] = Op{F: Read, Key: k}
	}
	return w.Run(ctx, ops)
}

// ReadSince runs a transaction that reads every key in use at any time
// since since (with RotateEvery, the keys of every rotation since; else
// the Keys keys): run once every client stopped, it shows where every
// committed append of the run went.
func (w *ListAppend) ReadSince(ctx context.Context, since time.Time) Outcome {
	first, last := 0, 0
	if r := int64(w.opts.RotateEvery); r > 0 {
		first, last = int(since.UnixNano()/r), int(time.Now().UnixNano()/r)
	}
	var ops []Op
	for g := first; g <= last; g++ {
		for i := range w.opts.Keys {
			ops = append(ops, Op{F: Read, Key: "k" + strconv.Itoa(g*w.opts.Keys+i)})
		}
	}
	return w.Run(ctx, ops)
}

// Run runs ops in one transaction (Update, so a conflict runs them again
// at a new snapshot) and records it.
func (w *ListAppend) Run(ctx context.Context, ops []Op) Outcome {
	id := w.next
	w.next++
	w.rec.Invoke(w.opts.Process, id, time.Now().UnixNano(), ops)
	var done []Op
	ran, fnOK := false, false // whether fn ran, and its last run returned nil
	err := w.db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		ran, fnOK, done = true, false, nil
		lists := map[string][]int64{}
		get := func(k string) ([]int64, error) {
			if l, ok := lists[k]; ok {
				return l, nil
			}
			l, err := readList(ctx, tx, w.opts.Table, k)
			if err == nil {
				lists[k] = l
			}
			return l, err
		}
		for _, op := range ops {
			l, err := get(op.Key)
			if err != nil {
				return err
			}
			if op.F == Append {
				l = append(l[:len(l):len(l)], op.Value)
				lists[op.Key] = l
				if err := tx.Set(w.opts.Table, []byte(op.Key), listColumn, encodeList(l)); err != nil {
					return err
				}
			} else {
				op.List = append([]int64{}, l...)
			}
			done = append(done, op)
		}
		fnOK = true
		return nil
	})
	w.err = err
	out := w.outcome(err, ran && fnOK)
	if out != OK {
		done = ops
	}
	w.rec.Complete(w.opts.Process, id, time.Now().UnixNano(), out, done)
	return out
}

// outcome classifies Update's error: nil is OK; a failure that certainly
// left nothing committed is Fail; anything else may have committed.
// Every attempt but the last ended without committing (Update runs again
// only after those), so what counts is the last: if its function did not
// run to the end (an error of a read, or of the transaction's start), it
// did not commit.
func (w *ListAppend) outcome(err error, committing bool) Outcome {
	switch {
	case err == nil:
		return OK
	case w.opts.Unknown != nil && w.opts.Unknown(err):
		return Info
	case !committing,
		errors.Is(err, framework.ErrConflict),
		errors.Is(err, framework.ErrSnapshotTooOld),
		errors.Is(err, store.ErrNoTimestamp):
		return Fail
	}
	return Info
}

func readList(ctx context.Context, tx *framework.Txn, table, k string) ([]int64, error) {
	v, found, err := tx.Lookup(ctx, table, []byte(k), listColumn)
	if err != nil || !found {
		return nil, err
	}
	return decodeList(v)
}

func encodeList(l []int64) []byte {
	var b []byte
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return b
}

func decodeList(b []byte) ([]int64, error) {
	if len(b) == 0 {
		return []int64{}, nil
	}
	parts := strings.Split(string(b), ",")
	out := make([]int64, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sicheck: a list holds %q: %w", b, err)
		}
		out[i] = v
	}
	return out, nil
}
