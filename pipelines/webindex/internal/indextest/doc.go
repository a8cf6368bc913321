// Package indextest owns the web index's test harness: Env, an in-memory
// deployment running the index's observers, to load pages into and read
// back, and Corpus, the tests' random model of what is loaded, to compare
// with package batch.
//
// It imports the web index's front door (package webindex) and the
// framework's test environment, and is imported only by tests: those of
// the web index and of its query and api packages share one harness.
package indextest
