//go:build !race

package indextest

// RaceEnabled reports a race-detector build; see race.go.
const RaceEnabled = false
