//go:build race

package percolator

// raceEnabled reports a race-detector build, where the TiKV mock runs some
// twenty times slower.
const raceEnabled = true
