package query

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/trickle-dev/trickle/framework"
)

// Snapshot names a past snapshot a view was read in: its timestamp and
// the oracle's time in it.
type Snapshot struct {
	Timestamp uint64    `json:"timestamp"`
	Time      time.Time `json:"time"`
}

// snapshotAt is the Snapshot of a view as of asOf; nil for now (0).
func snapshotAt(asOf uint64) *Snapshot {
	if asOf == 0 {
		return nil
	}
	return &Snapshot{Timestamp: asOf, Time: framework.TimeOf(asOf).UTC()}
}

// viewAt runs fn in a snapshot of db: the current one (asOf 0), or the one
// at asOf.
func viewAt(ctx context.Context, db *framework.DB, asOf uint64, fn func(ctx context.Context, tx *framework.Txn) error) error {
	if asOf == 0 {
		return db.View(ctx, fn)
	}
	return db.ViewAt(ctx, asOf, fn)
}

// ErrBadAsOf is wrapped by ParseAsOf's error for a value it cannot read.
var ErrBadAsOf = errors.New("webindex: bad as_of")

// ParseAsOf reads the as_of parameter of the API and UI: an RFC 3339 time
// (2026-11-27T10:00:00Z: the index as it was then), a negative duration
// (-10m: that long before now), or a timestamp as the index reports them
// (a decimal integer). It returns the snapshot's timestamp; "" is 0, now.
func ParseAsOf(s string, now time.Time) (uint64, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return 0, nil
	case strings.HasPrefix(s, "-"):
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%w: %q: %w", ErrBadAsOf, s, err)
		}
		return framework.TimestampAt(now.Add(d)), nil
	}
	if ts, err := strconv.ParseUint(s, 10, 64); err == nil {
		if ts == 0 {
			return 0, fmt.Errorf("%w: timestamp 0", ErrBadAsOf)
		}
		return ts, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: want an RFC 3339 time (2026-11-27T10:00:00Z), a negative duration (-10m) or a timestamp", ErrBadAsOf, s)
	}
	return framework.TimestampAt(t), nil
}
