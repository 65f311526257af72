// Package metrics is Strata's Prometheus face: one registry per mount,
// served on --metrics-addr.
//
// Most series are read at scrape time from the counters the core packages
// already keep (fs.FS.Stats, prefetch.Fetcher.Stats and its Budget,
// cache.Store.Stats), so the read path pays nothing for them. Two things
// are measured as they happen, because no counter exists for them: FUSE
// operations (through fs.Options.Observe: one cached counter and one
// histogram observation per op) and backend requests (through the
// decorator WrapBackend returns: count, latency and bytes per operation
// and status). The upload queue gauge is fed by a function the write path
// registers with SetUploadQueue.
//
// Names follow the Prometheus conventions: strata_<area>_<what>_total for
// counters, _bytes and _seconds units, base units only.
//
// Lock order: none is held across I/O. Metrics.fuse is a sync.Map of
// prepared children; sources and the upload-queue func are atomic
// pointers read at scrape time.
package metrics
