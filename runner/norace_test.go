//go:build !race

package runner_test

// raceEnabled reports a race-detector build; see race_test.go.
const raceEnabled = false
