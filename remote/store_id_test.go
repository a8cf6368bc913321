package remote

import (
	"errors"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// A client learns which store a service serves, so that one that reached
// the wrong deployment can tell.
func TestStoreIdentity(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	svc, err := ServeStore(nc, openMem(t), &ServiceOptions{Logger: quiet, SubjectPrefix: "a", StoreID: "store-a", StoreWhere: "host:/data/a"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	plain, err := ServeStore(nc, openMem(t), &ServiceOptions{Logger: quiet, SubjectPrefix: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()

	for _, c := range []struct{ prefix, id, where string }{{"a", "store-a", "host:/data/a"}, {"b", "", ""}} {
		cl, err := NewStore(connect(t, ns), &ClientOptions{SubjectPrefix: c.prefix})
		if err != nil {
			t.Fatal(err)
		}
		id, where, err := cl.Identity(bg)
		if err != nil || id != c.id || where != c.where {
			t.Errorf("prefix %s: Identity = %q, %q, %v; want %q, %q", c.prefix, id, where, err, c.id, c.where)
		}
	}
	cl, err := NewStore(connect(t, ns), &ClientOptions{SubjectPrefix: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.Identity(bg); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Identity with no service: %v, want ErrUnavailable", err)
	}
	for _, tc := range []struct {
		field string
		opts  ServiceOptions
	}{
		{"ServiceOptions.StoreWhere", ServiceOptions{StoreWhere: "x"}},
		{"ServiceOptions.StoreID", ServiceOptions{StoreID: string([]byte{0xff}), StoreWhere: "x"}},
		{"ServiceOptions.StoreID", ServiceOptions{StoreID: string(make([]byte, maxIdentity+1))}},
		{"ServiceOptions.StoreWhere", ServiceOptions{StoreID: "id", StoreWhere: string(make([]byte, 2000))}},
	} {
		var oe *OptionError
		if _, err := ServeStore(nc, openMem(t), &tc.opts); !errors.As(err, &oe) || oe.Field != tc.field {
			t.Errorf("ServeStore(%.40q, %.40q): %v, want an *OptionError for %s", tc.opts.StoreID, tc.opts.StoreWhere, err, tc.field)
		}
	}
}

// A client that expects a store sends its id with every request, and a
// service serving another store refuses the request before executing it:
// a client whose requests end up at another deployment (a reconnect to
// another server, a service replaced behind the same subjects) never
// writes there.
func TestExpectedStoreIsEnforced(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	stB := openMem(t)
	svc, err := ServeStore(nc, stB, &ServiceOptions{Logger: quiet, StoreID: "store-b", StoreWhere: "host:/data/b"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	osvc, err := ServeOracle(nc, newCountingOracle(t), &ServiceOptions{Logger: quiet, StoreID: "store-b", StoreWhere: "host:/data/b"})
	if err != nil {
		t.Fatal(err)
	}
	defer osvc.Stop()

	cl, err := NewStore(connect(t, ns), nil)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := NewOracle(connect(t, ns), nil)
	if err != nil {
		t.Fatal(err)
	}
	txn := &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: store.Column{Family: "f", Qualifier: "q"}, Ts: 5, Value: []byte("v")}}}
	cl.Expect("store-a")
	oc.Expect("store-a")
	if _, err := cl.Apply(bg, txn); !errors.Is(err, ErrWrongStore) || !strings.Contains(err.Error(), "store-a") || !strings.Contains(err.Error(), "store-b") {
		t.Fatalf("Apply meant for another store: %v, want ErrWrongStore naming both", err)
	}
	if _, err := oc.Reserve(bg, 1); !errors.Is(err, ErrWrongStore) {
		t.Fatalf("Reserve meant for another store's oracle: %v, want ErrWrongStore", err)
	}
	if cells, err := stB.ReadRow(bg, "t", []byte("r"), []store.Column{{Family: "f", Qualifier: "q"}}, nil); err != nil || len(cells) != 0 {
		t.Fatalf("the refused Apply wrote %v (%v)", cells, err)
	}
	cl.Expect("store-b")
	oc.Expect("store-b")
	if res, err := cl.Apply(bg, txn); err != nil || !res.Applied {
		t.Fatalf("Apply to the expected store: %+v, %v", res, err)
	}
	if _, err := oc.Reserve(bg, 1); err != nil {
		t.Fatalf("Reserve from the expected store's oracle: %v", err)
	}
}
