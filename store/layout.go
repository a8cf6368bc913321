package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/trickle-dev/trickle/store/internal/keys"
)

// layoutKey is the metadata key (in keys.MetaGroup) that holds the persisted
// group layout.
var layoutKey = []byte{byte(keys.MetaGroup), 'l', 'a', 'y', 'o', 'u', 't'}

// layout is the resolved, persisted assignment of families to groups and of
// groups to key-prefix ids. It is immutable after Open.
type layout struct {
	// Families maps every explicitly placed family to its group name.
	Families map[string]string `json:"families"`
	// Groups maps every group name ever used by this store to its id. Ids
	// are never reused, so data of a retired group can't be misread.
	Groups map[string]keys.Group `json:"groups"`
}

// groupOf returns the group id of a family.
func (l *layout) groupOf(family string) keys.Group {
	if g, ok := l.Families[family]; ok {
		return l.Groups[g]
	}
	return keys.DefaultGroup
}

// groupName returns the group name of a family.
func (l *layout) groupName(family string) string {
	if g, ok := l.Families[family]; ok {
		return g
	}
	return DefaultGroup
}

// groupID resolves a group name ("" means DefaultGroup).
func (l *layout) groupID(name string) (keys.Group, bool) {
	if name == "" {
		name = DefaultGroup
	}
	id, ok := l.Groups[name]
	return id, ok
}

// newLayout assigns ids for a fresh store: default first, then the other
// names in sorted order.
func newLayout(families map[string]string) (*layout, error) {
	l := &layout{
		Families: maps.Clone(families),
		Groups:   map[string]keys.Group{DefaultGroup: keys.DefaultGroup},
	}
	return l, l.addGroups(families)
}

// addGroups gives ids to the group names in families that have none yet, in
// sorted order after the highest id in use.
func (l *layout) addGroups(families map[string]string) error {
	next := int(keys.FirstExtraGroup)
	for _, id := range l.Groups {
		next = max(next, int(id)+1)
	}
	var fresh []string
	for _, g := range families {
		if _, ok := l.Groups[g]; !ok && !slices.Contains(fresh, g) {
			fresh = append(fresh, g)
		}
	}
	slices.Sort(fresh)
	for _, g := range fresh {
		if next > 0xFF {
			return fmt.Errorf("store: no group id left for group %q", g)
		}
		l.Groups[g] = keys.Group(next)
		next++
	}
	return nil
}

// merge checks the options' families against the persisted layout, adds new
// families and groups to it, and reports whether it changed.
func (l *layout) merge(families map[string]string, log *slog.Logger) (bool, error) {
	for fam, old := range l.Families {
		now, ok := families[fam]
		if !ok {
			now = DefaultGroup
		}
		if now != old {
			return false, fmt.Errorf("%w: family %q is stored in group %q but the options put it in %q",
				ErrGroupLayout, fam, old, now)
		}
	}
	changed := false
	for _, fam := range slices.Sorted(maps.Keys(families)) {
		if _, ok := l.Families[fam]; ok {
			continue
		}
		g := families[fam]
		if g != DefaultGroup {
			log.Warn("store: family newly mapped to a non-default group; any of its cells already in the default group are hidden",
				"family", fam, "group", g)
		}
		l.Families[fam] = g
		changed = true
	}
	n := len(l.Groups)
	if err := l.addGroups(families); err != nil {
		return false, err
	}
	return changed || n != len(l.Groups), nil
}

// loadLayout reads the persisted layout, reconciles it with the options and
// persists the result (synced) if it is new or changed.
func loadLayout(db *pebble.DB, families map[string]string, log *slog.Logger) (*layout, error) {
	val, closer, err := db.Get(layoutKey)
	var l *layout
	changed := false
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if l, err = newLayout(families); err != nil {
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
		if l.Families == nil || l.Groups == nil {
			return nil, errors.New("store: persisted group layout is incomplete")
		}
		if changed, err = l.merge(families, log); err != nil {
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
