package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/trickle-dev/trickle/internal/enginechoice"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// Failing notifications are recorded in the store, outside transactions, so
// that a status command in any process can list what is stuck and why.
var failureColumn = Column{Family: "f", Qualifier: "info"}

// Failure describes a notification whose observer keeps failing.
type Failure struct {
	Notification `json:"-"`
	Observer     string    `json:"observer"`
	Attempts     int       `json:"attempts"`
	LastError    string    `json:"last_error"`
	FirstAt      time.Time `json:"first_at"`
	LastAt       time.Time `json:"last_at"`
	NextRetry    time.Time `json:"next_retry"`
	Worker       string    `json:"worker"`
}

// RecordFailure stores (or updates) the failure record of f's
// notification, naming this processor's worker.
func (p *Processor) RecordFailure(ctx context.Context, f Failure) error {
	f.Worker = p.e.Setup().WorkerID
	v, err := json.Marshal(f)
	if err != nil {
		return err
	}
	_, err = p.e.Store().Apply(ctx, &store.RowTxn{
		Table: protocol.FailuresTable, Row: protocol.EncodeKey(f.Notification.key()), NoSync: true,
		Mutations: []store.Mutation{{Column: failureColumn, Value: v}},
	})
	return err
}

// ClearFailure removes n's failure record, if any.
func (p *Processor) ClearFailure(ctx context.Context, n Notification) error {
	_, err := p.e.Store().Apply(ctx, &store.RowTxn{
		Table: protocol.FailuresTable, Row: protocol.EncodeKey(n.key()), NoSync: true,
		Mutations: []store.Mutation{{Column: failureColumn, Delete: true}},
	})
	return err
}

// Failures returns the recorded failures whose notification is still
// pending (records of notifications processed since are stale and skipped).
func Failures(ctx context.Context, st store.Store) ([]Failure, error) {
	ns, err := enginechoice.NotificationsIn(ctx, st)
	if err != nil {
		return nil, err
	}
	var out []Failure
	for c, err := range st.Scan(ctx, store.ScanRequest{Table: protocol.FailuresTable}) {
		if err != nil {
			return nil, fmt.Errorf("notify: list failures: %w", err)
		}
		k, err := protocol.DecodeKey(c.Row)
		if err != nil {
			return nil, fmt.Errorf("notify: list failures: %w", err)
		}
		var f Failure
		if err := json.Unmarshal(c.Value, &f); err != nil {
			return nil, fmt.Errorf("notify: list failures: %s: %w", k, err)
		}
		f.Notification = Notification{Table: k.Table, Row: k.Row, Column: k.Column}
		pending, err := stillPending(ctx, ns, f.Notification)
		if err != nil {
			return nil, err
		}
		if pending {
			out = append(out, f)
		}
	}
	return out, nil
}

// stillPending reports whether n is pending in ns.
func stillPending(ctx context.Context, ns enginechoice.Notifications, n Notification) (bool, error) {
	for p, err := range ns.Find(ctx, n.Table, n.Row, append(slices.Clip(n.Row), 0)) {
		if err != nil && !errors.Is(err, ErrUndecodable) {
			return false, err
		}
		if err == nil && p.Column == n.Column {
			return true, nil
		}
	}
	return false, nil
}
