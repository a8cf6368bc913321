//go:build race

package indextest

// RaceEnabled reports a race-detector build, where sync.Pool drops pooled
// objects at random, so code reusing pooled buffers allocates more.
const RaceEnabled = true
