package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/runner"
)

// A runner that joined the owner's deployment reads in snapshots the
// owner's store service chooses (one round trip per read-only
// transaction instead of one to the oracle and one to the store), and
// those snapshots include every commit that completed before the read,
// whichever process made it.
func TestJoinersViewsTakeTheirSnapshotFromTheOwnersStore(t *testing.T) {
	ctx, owner, joiner := quietOwnerAndJoiner(t)

	const rounds = 10
	for i := range rounds {
		if err := owner.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("t", []byte("r"), col, []byte(strconv.Itoa(i)))
		}); err != nil {
			t.Fatal(err)
		}
		if err := joiner.DB().View(ctx, func(ctx context.Context, tx *framework.Txn) error {
			v, err := tx.Get(ctx, "t", []byte("r"), col)
			if err == nil && string(v) != strconv.Itoa(i) {
				t.Errorf("round %d: the joiner read %q after the owner committed %d", i, v, i)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if served := storeRequests(ctx, t, joiner)["trickle.store.readnow"]; served != rounds {
		t.Fatalf("the owner's store service chose %d snapshots, want the joiner's %d", served, rounds)
	}
}

// A joiner's transactions commit in one phase through the owner's store
// service (one round trip: every row written at once at a commit
// timestamp the owner's store service draws), and the owner sees each commit
// whole.
func TestJoinersCommitInOnePhaseThroughTheOwnersStore(t *testing.T) {
	ctx, owner, joiner := quietOwnerAndJoiner(t)

	const rounds = 10
	before := storeRequests(ctx, t, joiner)
	for i := range rounds {
		if err := joiner.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			if _, err := tx.Get(ctx, "t", []byte("a"), col); err != nil && !errors.Is(err, framework.ErrNotFound) {
				return err
			}
			for _, row := range []string{"a", "b"} {
				if err := tx.Set("t", []byte(row), col, []byte(strconv.Itoa(i))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := owner.DB().View(ctx, func(ctx context.Context, tx *framework.Txn) error {
			for _, row := range []string{"a", "b"} {
				v, err := tx.Get(ctx, "t", []byte(row), col)
				if err != nil {
					return err
				}
				if string(v) != strconv.Itoa(i) {
					t.Errorf("round %d: the owner read %s = %q after the joiner committed", i, row, v)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	after := storeRequests(ctx, t, joiner)
	for _, ep := range []string{"trickle.store.applyatomic", "trickle.store.applyall", "trickle.store.applynow"} {
		n, want := after[ep]-before[ep], 0
		if ep == "trickle.store.applyatomic" {
			want = rounds
		}
		if n != want {
			t.Errorf("%s served %d requests for the joiner's %d commits, want %d", ep, n, rounds, want)
		}
	}
}

// storeRequests returns how many requests the store service behind r has
// served, by endpoint subject.
func storeRequests(ctx context.Context, t *testing.T, r *runner.Runner) map[string]int {
	t.Helper()
	msg, err := r.Node().Conn().RequestWithContext(ctx, "$SRV.STATS.trickle-store", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, ep := range st.Endpoints {
		n[ep.Subject] = ep.NumRequests
	}
	return n
}

// quietOwnerAndJoiner starts an owner and a joiner on a fresh data
// directory, logging nothing, with a context that ends with the test (or
// after a minute).
func quietOwnerAndJoiner(t *testing.T) (context.Context, *runner.Runner, *runner.Runner) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cfg := runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, Logger: quiet}, HTTPAddr: "off"}
	owner, joiner := ownerAndJoiner(ctx, t, cfg)
	return ctx, owner, joiner
}
