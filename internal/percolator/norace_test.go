//go:build !race

package percolator

// raceEnabled reports a race-detector build; see race_test.go.
const raceEnabled = false
