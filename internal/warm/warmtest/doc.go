// Package warmtest builds a source, cache, metadata cache and fetcher for
// the tests of the warm engine and of what uses it (cache tools, control
// socket, mount).
//
// It has no locks; an Env is closed by the test's Cleanup.
package warmtest
