// Package gclimit keeps the Go runtime's soft memory limit (GOMEMLIMIT)
// a headroom above the heap a mount holds live.
//
// A mount sets the limit to what its fetch buffers, go-fuse's request
// buffers and the index need (cmd/strata), so that garbage does not grow
// the heap to twice what is live. The files the kernel knows are live as
// well, about 1 KiB each (docs/results/2026-11-28/inode-memory), and no
// constant covers them: with 500,000 of them the live heap (about 506
// MB) sat some 70 MB under the limit and the runtime collected 34-37
// times in a 33 s walk of them; 27.5 s now, 26 s with no limit at all
// (docs/results/2026-11-28/gc-limit). Keep raises the limit
// with the live heap, so that a collection comes every half a live heap
// of allocation at least, and lowers it again (never under the floor)
// when the kernel forgets the files.
//
// It has no locks: one goroutine reads the runtime's metrics and sets the
// limit.
package gclimit
