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
// A committed file's bytes (Content) belong to the manager until its
// upload is complete: the filesystem asks for them by key. The manager
// keeps the namespace (Names, cache/meta) current: a journaled upload
// shows as a local entry, and a completed one becomes the bucket's entry
// before the content is let go, so no reader finds neither.
//
// Lock order: Manager.mu, then Staging.mu or the namespace's (in-memory
// SetLocal/ClearLocal). Neither is held across an upload, a staging-file
// fsync or the journal append of a commit (Register holds Manager.mu for
// bookkeeping only; Journal does the I/O unlocked). Known exception:
// rewriting or deleting a journal entry (retry state, rename, drop) and
// removing a dropped staging file happen under Manager.mu.
package writeback
