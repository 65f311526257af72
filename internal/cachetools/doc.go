// Package cachetools owns a cache directory's maintenance and the files a
// mount leaves in it for them: Verify (re-check every block's CRC32C),
// GC (apply the size limit now), Clear (empty a directory nobody holds),
// Stats (what a directory holds, live through the mount's control socket
// when one serves it), the session file (session.json: a mount's
// counters) and the history of finished mounts (history.json). The same
// functions run offline (`strata cache ...` opening the directory with
// OfflineStore) and inside a running mount (its control socket's "verify",
// "gc" and "stats").
//
// Locks: Verify's mu guards its first error and the list of damaged keys
// (workers append; no I/O under it). Clear takes the cache directory's
// LOCK file, the one a mount holds, so it never empties a directory in use.
//
// cachetools may import cache, cache/index, cache/uring, internal/config
// and internal/control.
package cachetools
