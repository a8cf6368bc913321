//go:build race

package webindex_test

// raceEnabled reports a race-detector build, where sync.Pool drops pooled
// objects at random, so code reusing pooled buffers allocates more.
const raceEnabled = true
