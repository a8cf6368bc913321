package remote

import (
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// ingestRows returns prewrites without their checks: the plain writes an
// import ingests.
func ingestRows(n, valueSize int) []*store.RowTxn {
	txns := prewrites(n, valueSize)
	for _, txn := range txns {
		txn.Checks = nil
	}
	return txns
}

// TestIngestInParts: through a NATS server whose max payload is 64 KiB,
// an Ingest of several times that is one ingest request carried in parts,
// served by one Ingest of the service's store: every cell is written
// byte for byte, and the store's validation errors come back as its own.
func TestIngestInParts(t *testing.T) {
	ns := startNATSMaxPayload(t, 64<<10)
	env := newStoreEnvOn(t, ns, slowService(), slowClient())
	counter := countSubjects(t, ns)
	txns := ingestRows(40, 8_000) // 320 KB of values
	if err := env.client.Ingest(bg, txns); err != nil {
		t.Fatal(err)
	}
	counts := counter.take(t)
	if counts[DefaultPrefix+".store.ingest"] != 1 || counts[DefaultPrefix+".store.part"] < 320_000/(64<<10) {
		t.Errorf("Ingest of 320 KB: %v on the wire, want one ingest request and its parts", counts)
	}
	checkWritten(t, env.db, txns)
	if held := env.svc.srv.parts.bytesHeld(); held != 0 {
		t.Errorf("%d bytes still held after every transfer finished", held)
	}

	// A delete cannot be ingested: the store's InvalidError, naming the
	// mutation, and nothing of the call written.
	bad := ingestRows(3, 10)
	for _, txn := range bad {
		txn.Table = "other"
	}
	bad[2].Mutations[1] = store.Mutation{Column: col("f", "v"), Ts: 10, Delete: true}
	var inv *store.InvalidError
	if err := env.client.Ingest(bg, bad); !errors.As(err, &inv) || inv.Field != "txns[2].Mutations[1].Delete" {
		t.Fatalf("Ingest of a delete: %v, want the store's InvalidError naming txns[2].Mutations[1].Delete", err)
	}
	if got, err := env.db.ReadRow(bg, "other", bad[0].Row, []store.Column{col("f", "v")}, nil); err != nil || len(got) != 0 {
		t.Fatalf("a refused Ingest wrote %d cells (%v)", len(got), err)
	}
	// A nil row transaction is refused without a request.
	if err := env.client.Ingest(bg, []*store.RowTxn{txns[0], nil}); !errors.As(err, &inv) || inv.Field != "txns[1]" {
		t.Fatalf("Ingest with a nil row transaction: %v", err)
	}
	if counts := counter.take(t); counts[DefaultPrefix+".store.ingest"] != 1 {
		t.Errorf("%v on the wire, want one ingest request (the refused delete)", counts)
	}
}

// TestIngestUnsupported: a service whose store cannot ingest refuses an
// Ingest with an error matching errors.ErrUnsupported, having written
// nothing, so that the caller writes with ApplyAll instead; so does a
// connected client that finds nothing listening for Ingest (a service
// from before it).
func TestIngestUnsupported(t *testing.T) {
	ns := startNATS(t)
	db := openMem(t)
	_, _, client := serveClient(t, ns, struct{ store.Store }{db}, nil, nil) // hides Ingest
	txns := ingestRows(5, 100)
	if err := client.Ingest(bg, txns); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Ingest on a store without it: %v, want errors.ErrUnsupported", err)
	}
	for _, txn := range txns {
		if got, err := db.ReadRow(bg, txn.Table, txn.Row, []store.Column{col("f", "v")}, nil); err != nil || len(got) != 0 {
			t.Fatalf("a refused Ingest wrote %d cells (%v)", len(got), err)
		}
	}
	nobody, err := NewStore(connect(t, ns), &ClientOptions{SubjectPrefix: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	defer nobody.Close()
	if err := nobody.Ingest(bg, txns); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Ingest with no service listening: %v, want errors.ErrUnsupported", err)
	}
}
