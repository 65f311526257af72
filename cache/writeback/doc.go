// Package writeback is Strata's write path below the filesystem: files
// written through the mount are staged on the cache disk (Staging), handed
// over for upload when closed (Manager.Commit), journaled in the index so
// an acknowledged close survives a crash, and uploaded whole by a bounded
// pool of workers. An object appears in the bucket only once its upload is
// complete; a failed upload leaves nothing there and keeps the staged copy
// for retry. Once uploaded, the staged file becomes the cached copy of the
// new version (cache.Store.Adopt), so reading a checkpoint back costs no
// GET.
//
// Uploads of one key run in the order they were committed, and a newer
// commit supersedes an older one not yet uploaded (last close wins).
// Each upload is conditional on the version the writer started from, so a
// writer whose base changed in the bucket gets an error instead of
// silently clobbering the other write.
//
// Staged bytes count against the cache size: growing a staging file
// reserves space first, and a full cache is ENOSPC, never a truncation.
//
// Lock order: Manager.mu, then Staging.mu. Neither is held across an
// upload, a journal write or file I/O (Staging.mu covers only the size
// bookkeeping around a write).
package writeback
