package remote

import (
	"errors"
	"testing"
)

// A client learns which store a service serves, so that one that reached
// the wrong deployment can tell.
func TestStoreIdentity(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	svc, err := ServeStore(nc, openMem(t), WithSubjectPrefix("a"), WithStoreID("store-a", "host:/data/a"))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	plain, err := ServeStore(nc, openMem(t), WithSubjectPrefix("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()

	for _, c := range []struct{ prefix, id, where string }{{"a", "store-a", "host:/data/a"}, {"b", "", ""}} {
		cl, err := NewStore(connect(t, ns), WithSubjectPrefix(c.prefix))
		if err != nil {
			t.Fatal(err)
		}
		id, where, err := cl.Identity(bg)
		if err != nil || id != c.id || where != c.where {
			t.Errorf("prefix %s: Identity = %q, %q, %v; want %q, %q", c.prefix, id, where, err, c.id, c.where)
		}
	}
	cl, err := NewStore(connect(t, ns), WithSubjectPrefix("nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.Identity(bg); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Identity with no service: %v, want ErrUnavailable", err)
	}
	for _, bad := range []Option{WithStoreID("", "x"), WithStoreID(string([]byte{0xff}), "x"), WithStoreID("id", string(make([]byte, 2000)))} {
		if _, err := ServeStore(nc, openMem(t), bad); err == nil {
			t.Error("a bad WithStoreID was accepted")
		}
	}
}
