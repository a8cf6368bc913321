package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// Failing notifications are recorded in the store, outside transactions, so
// that a status command in any process can list what is stuck and why.
const failuresTable = reservedPrefix + "failures"

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

// RecordFailure stores (or updates) the failure record of n.
func (db *DB) RecordFailure(ctx context.Context, f Failure) error {
	f.Worker = db.opts.WorkerID
	v, err := json.Marshal(f)
	if err != nil {
		return err
	}
	_, err = db.st.Apply(ctx, &store.RowTxn{
		Table: failuresTable, Row: protocol.EncodeKey(f.Notification.key()), NoSync: true,
		Mutations: []store.Mutation{{Column: failureColumn, Value: v}},
	})
	return err
}

// ClearFailure removes n's failure record, if any.
func (db *DB) ClearFailure(ctx context.Context, n Notification) error {
	_, err := db.st.Apply(ctx, &store.RowTxn{
		Table: failuresTable, Row: protocol.EncodeKey(n.key()), NoSync: true,
		Mutations: []store.Mutation{{Column: failureColumn, Delete: true}},
	})
	return err
}

// ListFailures returns the recorded failures whose notification is still
// pending (records of notifications processed since are stale and skipped).
func ListFailures(ctx context.Context, st store.Store) ([]Failure, error) {
	var out []Failure
	for c, err := range st.Scan(ctx, store.ScanRequest{Table: failuresTable}) {
		if err != nil {
			return nil, fmt.Errorf("framework: list failures: %w", err)
		}
		k, err := protocol.DecodeKey(c.Row)
		if err != nil {
			return nil, fmt.Errorf("framework: list failures: %w", err)
		}
		var f Failure
		if err := json.Unmarshal(c.Value, &f); err != nil {
			return nil, fmt.Errorf("framework: list failures: %s: %w", k, err)
		}
		f.Notification = Notification{Table: k.Table, Row: k.Row, Column: k.Column}
		pending, err := st.ReadRow(ctx, k.Table, k.Row, []Column{protocol.NotifyColumn(k.Column)}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
		if err != nil {
			return nil, err
		}
		if len(pending) > 0 {
			out = append(out, f)
		}
	}
	return out, nil
}

// PendingNotifications counts the cells of tables that have a pending
// notification, reading the notify locality group only.
func PendingNotifications(ctx context.Context, st store.Store, tables []string) (int, error) {
	n := 0
	for _, t := range tables {
		req := store.ScanRequest{Table: t, Group: store.NotifyGroup, Spans: []store.Span{{MaxTs: ^uint64(0), Limit: 1}}}
		for _, err := range st.Scan(ctx, req) {
			if err != nil {
				return 0, fmt.Errorf("framework: pending notifications of %s: %w", t, err)
			}
			n++
		}
	}
	return n, nil
}

// AwaitNoPending polls every poll until tables have no pending
// notification, or ctx ends; the error then says how many were left. It is
// for callers that know no new writes are coming (tests, batch loads);
// runner.Wait also checks that no transaction ran meanwhile.
func AwaitNoPending(ctx context.Context, st store.Store, tables []string, poll time.Duration) error {
	for {
		n, err := PendingNotifications(ctx, st, tables)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("framework: %d notifications still pending: %w", n, ctx.Err())
		case <-t.C:
		}
	}
}
