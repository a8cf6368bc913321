package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"

	"github.com/trickle-dev/trickle/internal/keys"
	glayout "github.com/trickle-dev/trickle/store/internal/layout"
)

// layoutKey is the metadata key (in keys.MetaGroup) that holds the persisted
// group layout.
var layoutKey = []byte{byte(keys.MetaGroup), 'l', 'a', 'y', 'o', 'u', 't'}

// layout is the resolved, persisted assignment of families to groups and of
// groups to key-prefix ids (see package layout). It is immutable after Open.
type layout = glayout.Layout

// loadLayout reads the persisted layout, reconciles it with the options and
// persists the result (synced) if it is new or changed.
func loadLayout(db *pebble.DB, families map[string]string, log *slog.Logger) (*layout, error) {
	val, closer, err := db.Get(layoutKey)
	var l *layout
	changed := false
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if l, err = glayout.New(families); err != nil {
			return nil, err
		}
		changed = true
	case err != nil:
		return nil, fmt.Errorf("store: reading group layout: %w", err)
	default:
		l = &layout{}
		err = json.Unmarshal(val, l)
		closer.Close()
		if err != nil {
			return nil, fmt.Errorf("store: decoding group layout: %w", err)
		}
		if err := l.Complete(); err != nil {
			return nil, err
		}
		warn := func(fam, g string) {
			log.Warn("store: family newly mapped to a non-default group; any of its cells already in the default group are hidden",
				"family", fam, "group", g)
		}
		if changed, err = l.Merge(families, warn); err != nil {
			return nil, err
		}
	}
	if changed {
		buf, err := json.Marshal(l)
		if err != nil {
			return nil, err
		}
		if err := db.Set(layoutKey, buf, pebble.Sync); err != nil {
			return nil, fmt.Errorf("store: persisting group layout: %w", err)
		}
	}
	return l, nil
}
