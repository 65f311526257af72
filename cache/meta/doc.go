// Package meta is the metadata cache: directory listings and point lookups
// of one source, kept in memory and persisted in the badger index with the
// time they were fetched, so that lookups and readdir are answered without
// a request while the metadata TTL lasts, and after a restart too.
//
// It also owns the namespace rules that turn keys into a POSIX tree
// (names.go): implicit directories from "/", a name that is both a key and
// a prefix is a directory, keys that are not valid names are skipped with
// one warning each.
//
// A listing is loaded page by page; readers stream entries as pages
// arrive, and concurrent readers of one directory share one load. When a
// listing expires it is reloaded; if the backend cannot be reached the
// stale listing keeps being served (with a warning), because a training
// job would rather see yesterday's tree than EIO.
//
// Lock order: dirState.persistMu, then Cache.mu, then dirState.mu, then
// listing.mu. Only persistMu is held across an index write (it orders the
// writes of overlapping loads of one directory); nothing is held across a
// backend call.
package meta
