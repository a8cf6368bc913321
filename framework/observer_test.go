package framework_test

import (
	"context"
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
)

var (
	colA = framework.Column{Family: "c", Qualifier: "a"}
	colB = framework.Column{Family: "c", Qualifier: "b"}
	colC = framework.Column{Family: "c", Qualifier: "c"}
)

func noop(context.Context, *framework.Txn, []byte, framework.Column) error { return nil }

func TestRegistryRules(t *testing.T) {
	r := framework.NewRegistry()
	if err := r.Register(framework.Observer{Name: "a", Table: "t", Columns: []framework.Column{colA}, Kind: framework.Strong, Fn: noop}); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]framework.Observer{
		"duplicate name":   {Name: "a", Table: "t", Columns: []framework.Column{colB}, Kind: framework.Strong, Fn: noop},
		"duplicate column": {Name: "b", Table: "t", Columns: []framework.Column{colA}, Kind: framework.Weak, Fn: noop},
	} {
		if err := r.Register(o); !errors.Is(err, framework.ErrInvalidObserver) {
			t.Errorf("%s: %v, want ErrInvalidObserver", name, err)
		}
	}
	for name, o := range map[string]framework.Observer{
		"no name":         {Table: "t", Columns: []framework.Column{colB}, Kind: framework.Strong, Fn: noop},
		"no function":     {Name: "x", Table: "t", Columns: []framework.Column{colB}, Kind: framework.Strong},
		"no kind":         {Name: "x", Table: "t", Columns: []framework.Column{colB}, Fn: noop},
		"no column":       {Name: "x", Table: "t", Kind: framework.Strong, Fn: noop},
		"reserved family": {Name: "x", Table: "t", Columns: []framework.Column{{Family: "__ack", Qualifier: "q"}}, Kind: framework.Strong, Fn: noop},
	} {
		if err := r.Register(o); !errors.Is(err, framework.ErrInvalidObserver) {
			t.Errorf("%s: %v, want ErrInvalidObserver", name, err)
		}
	}
	// The same column in another table is another column.
	if err := r.Register(framework.Observer{Name: "other", Table: "u", Columns: []framework.Column{colA}, Kind: framework.Strong, Fn: noop}); err != nil {
		t.Fatal(err)
	}
	r.Freeze()
	if err := r.Register(framework.Observer{Name: "late", Table: "t", Columns: []framework.Column{colC}, Kind: framework.Strong, Fn: noop}); !errors.Is(err, framework.ErrInvalidObserver) {
		t.Errorf("register after freeze: %v", err)
	}
}

// The kinds are the engine's, value for value: the runtime converts one to
// the other.
func TestKindsMatchTheEngine(t *testing.T) {
	if framework.Strong != framework.ObserverKind(engine.Strong) || framework.Weak != framework.ObserverKind(engine.Weak) {
		t.Fatal("observer kinds differ from the engine's")
	}
}
