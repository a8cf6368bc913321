package framework_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
)

// docState guards the postings of a document: terms/<term>/posting:<doc>
// is written only with docs/<doc>/meta:state.
var docState = framework.Guard{
	Table: "terms", Family: "posting",
	Of: func(_ []byte, col framework.Column) (string, []byte, framework.Column) {
		return "docs", []byte(col.Qualifier), framework.Column{Family: "meta", Qualifier: "state"}
	},
}

// Guard declarations are validated, unique per family, and refused once
// the registry is in use.
func TestRegistryGuardValidates(t *testing.T) {
	reg := framework.NewRegistry()
	for _, tc := range []struct {
		g    framework.Guard
		want string
	}{
		{framework.Guard{Table: "terms", Family: "posting"}, "nil Of"},
		{framework.Guard{Table: "", Family: "posting", Of: docState.Of}, "table"},
		{framework.Guard{Table: "terms", Family: "", Of: docState.Of}, "family"},
	} {
		if err := reg.Guard(tc.g); !errors.Is(err, framework.ErrInvalidObserver) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Guard(%s/%s): %v, want an error naming the %s", tc.g.Table, tc.g.Family, err, tc.want)
		}
	}
	if err := reg.Guard(docState); err != nil {
		t.Fatal(err)
	}
	if err := reg.Guard(docState); !errors.Is(err, framework.ErrInvalidObserver) {
		t.Fatalf("second declaration of a family: %v", err)
	}
	table, row, col, ok := reg.GuardOf("terms", []byte("apple"), framework.Column{Family: "posting", Qualifier: "d1"})
	if !ok || table != "docs" || string(row) != "d1" || col.Qualifier != "state" {
		t.Fatalf("GuardOf = %s %q %v %v", table, row, col, ok)
	}
	if _, _, _, ok := reg.GuardOf("terms", []byte("apple"), framework.Column{Family: "other", Qualifier: "d1"}); ok {
		t.Fatal("a cell of another family is guarded")
	}
	reg.Freeze()
	other := docState
	other.Family = "posting2"
	if err := reg.Guard(other); !errors.Is(err, framework.ErrInvalidObserver) {
		t.Fatalf("Guard on a frozen registry: %v", err)
	}
}

// A DB opened with a registry enforces its guards.
func TestDBRefusesAGuardedCellWithoutItsGuard(t *testing.T) {
	st := memStore(t, vfs.NewMem())
	defer st.Close()
	ctx := context.Background()
	reg := framework.NewRegistry()
	if err := reg.Guard(docState); err != nil {
		t.Fatal(err)
	}
	db, err := framework.Open(ctx, st, memOracle(t), &framework.Options{Observers: reg})
	if err != nil {
		t.Fatal(err)
	}
	posting := framework.Column{Family: "posting", Qualifier: "d1"}
	err = db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("terms", []byte("apple"), posting, []byte("1"))
	})
	if !errors.Is(err, framework.ErrUnguarded) || !strings.Contains(err.Error(), `docs/"d1"`) {
		t.Fatalf("commit without the guard: %v, want ErrUnguarded naming docs/d1", err)
	}
	if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		_, err := tx.Get(ctx, "terms", []byte("apple"), posting)
		return err
	}); !errors.Is(err, framework.ErrNotFound) {
		t.Fatalf("the refused posting: %v", err)
	}
}

// A search index declares that a document's postings, one cell per term,
// are only written together with the document's state: its commits then
// check the state for conflicts and not each posting.
func ExampleRegistry_Guard() {
	reg := framework.NewRegistry()
	err := reg.Guard(framework.Guard{
		Table: "terms", Family: "posting",
		Of: func(_ []byte, col framework.Column) (string, []byte, framework.Column) {
			return "docs", []byte(col.Qualifier), framework.Column{Family: "meta", Qualifier: "state"}
		},
	})
	fmt.Println(err)
	table, row, col, _ := reg.GuardOf("terms", []byte("apple"), framework.Column{Family: "posting", Qualifier: "doc-1"})
	fmt.Printf("%s/%s/%s:%s\n", table, row, col.Family, col.Qualifier)
	// Output:
	// <nil>
	// docs/doc-1/meta:state
}

// The runners publish their guarded families: a DB opened without the
// declaration (a loader, a tool, a process of another release) refuses to
// write a guarded cell, whose guard it could not write, while one opened
// with the runners' Registry writes it with its guard.
func TestAGuardedFamilyIsRefusedToWritersThatDoNotDeclareIt(t *testing.T) {
	ctx := context.Background()
	reg := framework.NewRegistry()
	if err := reg.Guard(docState); err != nil {
		t.Fatal(err)
	}
	env, err := frameworktest.Start(ctx, reg, nil) // publishes reg
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	posting := framework.Column{Family: "posting", Qualifier: "d1"}
	unaware, err := framework.Open(ctx, env.Store(), env.Oracle(), &framework.Options{Observers: framework.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	err = unaware.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("terms", []byte("apple"), posting, []byte("1"))
	})
	if !errors.Is(err, framework.ErrUnguarded) {
		t.Fatalf("a writer without the declaration wrote a guarded cell: %v", err)
	}
	aware, err := framework.Open(ctx, env.Store(), env.Oracle(), &framework.Options{Observers: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := aware.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		if err := tx.Set("terms", []byte("apple"), posting, []byte("1")); err != nil {
			return err
		}
		return tx.Set("docs", []byte("d1"), framework.Column{Family: "meta", Qualifier: "state"}, []byte("s"))
	}); err != nil {
		t.Fatal(err)
	}
}
