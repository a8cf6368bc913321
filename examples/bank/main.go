// Command bank runs concurrent random transfers between accounts in
// cross-row transactions on an embedded store, then checks in one snapshot
// that no money was created or destroyed. Run it twice: the store and the
// timestamp oracle persist in -dir, and the second run continues from the
// first run's balances.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

var balance = framework.Column{Family: "bal", Qualifier: "v"}

func main() {
	dir := flag.String("dir", "data/bank", "directory for the store and the oracle's state")
	accounts := flag.Int("accounts", 1000, "number of accounts")
	workers := flag.Int("workers", 16, "concurrent transfer goroutines")
	transfers := flag.Int("transfers", 200, "transfers per goroutine")
	flag.Parse()
	if err := run(context.Background(), *dir, *accounts, *workers, *transfers); err != nil {
		fmt.Fprintln(os.Stderr, "bank:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string, accounts, workers, transfers int) error {
	if accounts < 2 || workers < 1 || transfers < 0 {
		return errors.New("need at least 2 accounts, 1 worker and 0 transfers")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	st, err := store.Open(filepath.Join(dir, "store"), framework.StoreOptions(nil))
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := oracle.NewServer(oracle.NewFilePersister(filepath.Join(dir, "oracle")), nil)
	if err != nil {
		return err
	}
	defer srv.Close()
	ts, err := oracle.NewClient(srv, nil)
	if err != nil {
		return err
	}
	defer ts.Close()
	// No observers: say so with an empty registry.
	db, err := framework.Open(ctx, st, ts, &framework.Options{Observers: framework.NewRegistry(), Logger: slog.Default()})
	if err != nil {
		return err
	}

	row := func(i int) []byte { return []byte(fmt.Sprintf("acct%06d", i)) }
	// Open the accounts that do not exist yet with 100 each.
	created := 0
	err = db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		created = 0
		for i := range accounts {
			_, err := tx.Get(ctx, "bank", row(i), balance)
			if errors.Is(err, framework.ErrNotFound) {
				created++
				err = tx.Set("bank", row(i), balance, []byte("100"))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("opening accounts: %w", err)
	}
	before, err := total(ctx, db)
	if err != nil {
		return err
	}
	fmt.Printf("%d accounts (%d new), total %d\n", accounts, created, before)

	start := time.Now()
	var runs atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range transfers {
				from, to, amount := rand.N(accounts), rand.N(accounts), rand.N(10)
				err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
					runs.Add(1) // Update runs the function again after a conflict
					a, err := getInt(ctx, tx, row(from))
					if err != nil || from == to || a < amount {
						return err
					}
					b, err := getInt(ctx, tx, row(to))
					if err != nil {
						return err
					}
					if err := tx.Set("bank", row(from), balance, []byte(strconv.Itoa(a-amount))); err != nil {
						return err
					}
					return tx.Set("bank", row(to), balance, []byte(strconv.Itoa(b+amount)))
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	elapsed := time.Since(start)
	after, err := total(ctx, db)
	if err != nil {
		return err
	}
	fmt.Printf("%d transfers in %v (%.0f/s), %d conflicts retried; total %d\n",
		workers*transfers, elapsed.Round(time.Millisecond), float64(workers*transfers)/elapsed.Seconds(), runs.Load()-int64(workers*transfers), after)
	if after != before {
		return fmt.Errorf("total changed from %d to %d", before, after)
	}
	return nil
}

func getInt(ctx context.Context, tx *framework.Txn, row []byte) (int, error) {
	v, err := tx.Get(ctx, "bank", row, balance)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

func total(ctx context.Context, db *framework.DB) (int, error) {
	sum := 0
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: "bank", Columns: []framework.Column{balance}}) {
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(string(e.Value))
			if err != nil {
				return fmt.Errorf("account %s: %w", e.Row, err)
			}
			sum += n
		}
		return nil
	})
	return sum, err
}
