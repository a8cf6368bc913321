package sicheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/trickle-dev/trickle/framework"
)

// BankOptions configure a bank client. The zero value is usable:
// EnsureDefaults fills in every field left unset.
type BankOptions struct {
	// Accounts is how many accounts money moves between. Default: 8.
	Accounts int
	// Initial is each account's balance before any transfer. Default: 100.
	Initial int64
	// Table holds the balances, one row an account. Default:
	// "sicheck_bank".
	Table string
	// Seed seeds the client's choices; 0 picks one at random.
	// Default: 0.
	Seed uint64
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *BankOptions) EnsureDefaults() *BankOptions {
	if o.Accounts == 0 {
		o.Accounts = 8
	}
	if o.Initial == 0 {
		o.Initial = 100
	}
	if o.Table == "" {
		o.Table = "sicheck_bank"
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	return o
}

// Validate reports the first unusable field.
func (o *BankOptions) Validate() error {
	switch {
	case o.Accounts < 2:
		return fmt.Errorf("%w: Accounts %d, want at least 2", ErrInvalidOptions, o.Accounts)
	case o.Initial < 1:
		return fmt.Errorf("%w: Initial %d, want at least 1", ErrInvalidOptions, o.Initial)
	}
	return nil
}

var balanceColumn = framework.Column{Family: "bal", Qualifier: "v"}

// Bank moves money between accounts in transactions and reads every
// balance in snapshots: under snapshot isolation every snapshot sums to
// the money there is, and no balance goes below zero (a transfer reads
// the balance it draws from, and first-committer-wins refuses a second
// transfer that read the same one). Any number of Bank clients may share
// the accounts; each runs on one goroutine.
type Bank struct {
	db   *framework.DB
	opts BankOptions
	rng  *rand.Rand

	mu        sync.Mutex
	anomalies []Anomaly
	// Transfers and Reads count what committed.
	Transfers, Reads int
}

// NewBank returns a bank client of db. opts may be nil.
func NewBank(db *framework.DB, opts *BankOptions) (*Bank, error) {
	var o BankOptions
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Bank{db: db, opts: o, rng: rand.New(rand.NewPCG(o.Seed, 1))}, nil
}

func (b *Bank) account(i int) []byte { return []byte("a" + strconv.Itoa(i)) }

// Open gives every account its initial balance unless the accounts exist
// already (another client opened them): one transaction, so either all
// exist or none.
func (b *Bank) Open(ctx context.Context) error {
	return b.db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		if _, found, err := tx.Lookup(ctx, b.opts.Table, b.account(0), balanceColumn); err != nil || found {
			return err
		}
		for i := range b.opts.Accounts {
			if err := tx.Set(b.opts.Table, b.account(i), balanceColumn, strconv.AppendInt(nil, b.opts.Initial, 10)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Step moves a random amount between two random accounts, or (one time in
// three) reads every balance and checks the snapshot. It returns Update's
// or View's error.
func (b *Bank) Step(ctx context.Context) error {
	if b.rng.IntN(3) == 0 {
		return b.read(ctx)
	}
	from := b.rng.IntN(b.opts.Accounts)
	to := (from + 1 + b.rng.IntN(b.opts.Accounts-1)) % b.opts.Accounts
	amount := 1 + b.rng.Int64N(b.opts.Initial/2+1)
	err := b.db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		bal, err := b.balances(ctx, tx, from, to)
		if err != nil || bal[0] < amount {
			return err
		}
		if err := tx.Set(b.opts.Table, b.account(from), balanceColumn, strconv.AppendInt(nil, bal[0]-amount, 10)); err != nil {
			return err
		}
		return tx.Set(b.opts.Table, b.account(to), balanceColumn, strconv.AppendInt(nil, bal[1]+amount, 10))
	})
	if err == nil {
		b.mu.Lock()
		b.Transfers++
		b.mu.Unlock()
	}
	return err
}

// read reads every balance in one snapshot and checks it.
func (b *Bank) read(ctx context.Context) error {
	all := make([]int, b.opts.Accounts)
	for i := range all {
		all[i] = i
	}
	var bal []int64
	err := b.db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		var err error
		bal, err = b.balances(ctx, tx, all...)
		return err
	})
	if err != nil {
		return err
	}
	var sum int64
	for i, v := range bal {
		sum += v
		if v < 0 {
			b.anomaly(fmt.Sprintf("account %d reads %d in a snapshot of %v", i, v, bal))
		}
	}
	if want := int64(b.opts.Accounts) * b.opts.Initial; sum != want {
		b.anomaly(fmt.Sprintf("a snapshot of the balances %v sums to %d, want %d", bal, sum, want))
	}
	b.mu.Lock()
	b.Reads++
	b.mu.Unlock()
	return nil
}

func (b *Bank) anomaly(detail string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.anomalies = append(b.anomalies, Anomaly{Kind: "bank", Detail: detail})
}

// balances reads the balances of the accounts ids, in one round trip.
func (b *Bank) balances(ctx context.Context, tx *framework.Txn, ids ...int) ([]int64, error) {
	rows := make([][]byte, len(ids))
	for i, id := range ids {
		rows[i] = b.account(id)
	}
	got, err := tx.GetRows(ctx, b.opts.Table, rows, []framework.Column{balanceColumn})
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(ids))
	for i, r := range rows {
		v, ok := got[string(r)][balanceColumn]
		if !ok {
			return nil, fmt.Errorf("sicheck: account %s has no balance: Open the bank first", r)
		}
		if out[i], err = strconv.ParseInt(string(v), 10, 64); err != nil {
			return nil, fmt.Errorf("sicheck: account %s holds %q: %w", r, v, err)
		}
	}
	return out, nil
}

// Anomalies returns the snapshots found wrong so far.
func (b *Bank) Anomalies() []Anomaly {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Anomaly(nil), b.anomalies...)
}
