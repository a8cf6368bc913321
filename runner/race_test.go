//go:build race

package runner_test

// raceEnabled reports a race-detector build, where the TiKV mock runs some
// twenty times slower: tests on it use smaller inputs.
const raceEnabled = true
