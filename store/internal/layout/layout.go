// Package layout is the assignment of column families to locality groups
// and of groups to the key-prefix ids of package keys, shared by every
// store that lays cells out with that codec. A store persists its layout
// at its first open and reconciles it with its options at every later
// open, so that a group keeps its id (and its data stays readable) for as
// long as the store exists.
package layout

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/trickle-dev/trickle/internal/keys"
)

// DefaultName is the name of the group of every family not mapped
// elsewhere; it is store.DefaultGroup.
const DefaultName = "default"

// ErrChanged is returned when options would move a family whose data is
// already stored in another group; store.ErrGroupLayout is this error.
var ErrChanged = errors.New("store: locality group layout changed")

// Layout is the resolved, persisted layout. It is immutable once a store
// uses it.
type Layout struct {
	// Families maps every explicitly placed family to its group name.
	Families map[string]string `json:"families"`
	// Groups maps every group name ever used by the store to its id. Ids
	// are never reused, so data of a retired group can't be misread.
	Groups map[string]keys.Group `json:"groups"`
}

// GroupOf returns the group id of a family.
func (l *Layout) GroupOf(family string) keys.Group {
	if g, ok := l.Families[family]; ok {
		return l.Groups[g]
	}
	return keys.DefaultGroup
}

// GroupName returns the group name of a family.
func (l *Layout) GroupName(family string) string {
	if g, ok := l.Families[family]; ok {
		return g
	}
	return DefaultName
}

// GroupID resolves a group name ("" means DefaultName).
func (l *Layout) GroupID(name string) (keys.Group, bool) {
	if name == "" {
		name = DefaultName
	}
	id, ok := l.Groups[name]
	return id, ok
}

// New assigns ids for a fresh store: the default group first, then the
// other names in sorted order.
func New(families map[string]string) (*Layout, error) {
	l := &Layout{
		Families: maps.Clone(families),
		Groups:   map[string]keys.Group{DefaultName: keys.DefaultGroup},
	}
	if l.Families == nil {
		l.Families = map[string]string{}
	}
	return l, l.addGroups(families)
}

// Complete reports an error if a decoded layout lacks one of its maps.
func (l *Layout) Complete() error {
	if l.Families == nil || l.Groups == nil {
		return errors.New("store: persisted group layout is incomplete")
	}
	return nil
}

// addGroups gives ids to the group names in families that have none yet, in
// sorted order after the highest id in use.
func (l *Layout) addGroups(families map[string]string) error {
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

// Merge checks the options' families against the persisted layout, adds
// new families and groups to it, and reports whether it changed. warn is
// called for every family newly mapped to a non-default group: cells it
// may already have in the default group become hidden.
func (l *Layout) Merge(families map[string]string, warn func(family, group string)) (bool, error) {
	for fam, old := range l.Families {
		now, ok := families[fam]
		if !ok {
			now = DefaultName
		}
		if now != old {
			return false, fmt.Errorf("%w: family %q is stored in group %q but the options put it in %q",
				ErrChanged, fam, old, now)
		}
	}
	changed := false
	for _, fam := range slices.Sorted(maps.Keys(families)) {
		if _, ok := l.Families[fam]; ok {
			continue
		}
		g := families[fam]
		if g != DefaultName {
			warn(fam, g)
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
