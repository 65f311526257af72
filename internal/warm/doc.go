// Package warm is the warm engine: a Job hydrates the objects a Request
// names (a key prefix, or a list of files and directories) into a cache,
// through the same metadata cache, store and fetcher a mount uses, so the
// keys, versions and cache entries are exactly the ones the mount will
// look for. It is used by `strata warm` offline, by a running mount's
// control socket and by --warm-on-mount (internal/mount builds the Job).
//
// Locks: Job.mu guards the first few error messages only; the counters
// are atomics. No lock is held across I/O.
//
// warm may import cache, cache/meta, prefetch, backend and internal/config.
package warm
