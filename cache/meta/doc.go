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
// After a restart a directory's listing comes from the index the first
// time it is needed; callers arriving while that read runs wait for it
// (dirState.diskRead) instead of asking the backend. An edit (Upsert,
// Remove) of a directory not read yet in this run reads that listing
// first, so that the edit reaches it, in memory and in the index.
//
// A listing is loaded page by page; readers stream entries as pages
// arrive, and concurrent readers of one directory share one load. Local
// edits (Upsert, Remove) made while a load runs are kept aside and applied
// to its listing as it becomes current (dirState.edits): its pages may
// have been listed before them. Lookups answered from a load still
// running look at those edits first (editedDuring), and a Reader gives
// each name's newest entry (Reader.newest: a local one, an edit made
// while it loaded, or a newer copy of the listing made since it opened). A load
// that fails part way leaves a resume point (resume.go): the next load of
// that directory goes on from the page that failed. When a
// listing expires it is reloaded; if the backend cannot be reached the
// stale listing keeps being served (with a warning), because a training
// job would rather see yesterday's tree than EIO.
//
// Listing prefetch (flat.go, flatbuild.go): when a load from the backend
// finds subdirectories, their subtrees are listed in the background flat
// (no delimiter), one split per subdirectory, at most Options.ListPrefetch
// list calls at a time for the whole Cache; a split that needs more than a
// page while workers are idle fans out along its own subdirectories; a
// directory whose prefetched subtrees nobody read since does not start
// another (dirState.unwalked); after maxPrefetchedDirs directories in a
// Cache's life it stops for good (prefetcher.spent). Every
// directory found inside is installed as a complete listing (persisted)
// fetched when the split started, unless the directory has something at
// least as recent: a load done or running, a local edit or invalidation
// (dirState.mutatedAt, Cache.invalidations). Local entries (SetLocal) are
// an overlay and never touched. Hidden keys (Hide, hidden.go: the object
// of a file deleted or renamed while its upload ran, in the bucket until
// the uploader takes it down) are an overlay the other way: no listing or
// lookup shows them, and Unhide records the name as gone, an edit that a
// load running meanwhile applies as it ends. Splits run under the Cache's context and
// loads WaitGroup, so Close stops them. A readdir of a directory strictly
// inside a split that will install it soon (its first page is coming, or
// it is inside that directory now) waits for it, up to splitWait, rather
// than racing it with a request of its own (splitwait.go); a load queues
// its subtrees before its readers see the end of the listing, so that a
// walk going on from there finds them queued.
//
// A lookup that no listing answers asks the backend about the one name
// (a HEAD and a one-key LIST, sent again beside themselves while they have
// no answer: hedge.go);
// with Options.HeadBytes it asks with a GET of the object's first bytes
// (heads.go), and a small file's whole content waits for the caller to
// take it (TakeHead) and cache it, so its open needs no request. With the
// backend unreachable a lookup answers stale from the newer of the two
// things the cache may know of the name: its directory's listing or a point
// lookup of it (point.go, staleAnswer); local edits stamp a point too,
// and a backend answer asked before such an edit and back after it is
// not remembered over it (rememberAnswer).
// Every answer comes with its lease (LookupLease, Reader.Lookup): what is
// left of the TTL of what it came from, which the kernel keeps it for.
//
// Lock order: dirState.persistMu, then Cache.mu, then dirState.mu, then
// listing.mu (a load that fails takes dirState.mu and Cache.mu one after
// the other, never together); prefetcher.mu and heads.mu are leaves (split fields are guarded by it). Only persistMu is held across an
// index write (it orders the writes of overlapping loads, prefetches and
// edits of one directory); nothing is held across a backend call.
package meta
