package runner_test

import (
	"context"
	"encoding/json"
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
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, Logger: quiet}, HTTPAddr: "off"}
	owner, joiner := ownerAndJoiner(ctx, t, cfg)

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
	msg, err := joiner.Node().Conn().RequestWithContext(ctx, "$SRV.STATS.trickle-store", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatal(err)
	}
	var served int
	for _, ep := range st.Endpoints {
		if ep.Subject == "trickle.store.readnow" {
			served = ep.NumRequests
		}
	}
	if served != rounds {
		t.Fatalf("the owner's store service chose %d snapshots, want the joiner's %d", served, rounds)
	}
}
