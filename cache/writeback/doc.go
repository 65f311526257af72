// Package writeback is Strata's write path below the filesystem: files
// written through the mount are staged on the cache disk (Staging), handed
// over for upload when closed (Register, then Journal; Commit does both),
// journaled in the index so an acknowledged close survives a crash, and
// uploaded whole by a dispatcher that runs at most Concurrency uploads at
// once. An object appears in the bucket only once its upload is complete;
// a failed upload leaves nothing there and keeps the staged copy for
// retry (backing off, with a probe that ends the backoff once the backend
// answers: retry.go). Once uploaded, the staged file becomes the cached
// copy of the new version (cache.Store.Adopt), so reading a checkpoint
// back costs no GET. An open session counts as its key being written (the
// end of an upload leaves a key being written shown as local) until it is
// committed, discarded or orphaned (Staging.Orphan: the file's name went
// while descriptors still write it).
//
// Uploads of one key run in the order they were committed, and a newer
// commit supersedes an older one not yet uploaded (last close wins). A
// rename, a delete or a newer commit stops an attempt in flight only
// before its last request is sent (backend.PutOptions.Stop); after that
// the attempt waits for the answer, and an object that landed where it
// no longer belongs is taken back down: a cancelled request can still
// reach the bucket, unknown to anyone. A deleted file's entry stays in
// the journal until then, marked as one to take down (UploadOvertaken):
// a kill -9 in between leaves the take-down to the next mount, before any
// upload of the key (overtaken.go). A take-down whose delete fails is
// retried in the background, its entry kept (now naming the version that
// landed) until the object is down; meanwhile it holds the key as an
// attempt does (takedown.go). `strata uploads` lists take-downs, `strata
// sync` waits for them, and one refused for good (permanent) fails as an
// upload does, its key let go, until Retry (takedown_state.go). A key
// is also busy while an attempt writes it for a job renamed away since
// (Manager.inFlight): that attempt may still land there and be taken back
// down, so a new file under the old name waits for it to end. An upload
// overtaken by a rename over its file is not taken down when a file is
// being renamed to the name (BeginMove to Done) or waits to upload there:
// that one replaces it, and the name is never missing from the bucket
// (replacedLocked); a rename that copies a file over the name
// server-side waits for such an attempt first (WaitInFlight). The
// newer one holds the older one's bytes (its session was staged from
// them), so a sync close of a superseded commit returns with the newer
// upload (Job.successor, waitSuccessor).
// Each upload is conditional on the version the writer started from, so a
// writer whose base changed in the bucket gets an error instead of
// silently clobbering the other write; a precondition failure is first
// compared with the bucket's object, in case an earlier attempt landed
// (confirm.go).
//
// In async mode an upload waits Options.Delay (--upload-delay, 5 s) after
// its file's last close, and until its directory has been quiet as long
// (no file of it being written, opened, closed or renamed into it; at most
// delayCap delays): a directory written and then renamed (the Hugging Face
// Trainer's tmp-checkpoint-N) is renamed by Rekey before anything goes up
// (delay.go). fsync, strata sync, Retry and unmount end the delay. A
// close of one descriptor while the file stays open commits it held
// (CommitHeld): it uploads at the last close (Unhold). strata sync
// (WaitAll) waits up to heldReleaseWait for holds to end, since the
// kernel sends a file's RELEASE after close() has returned (syncwait.go),
// and within the same bound for the sessions the filesystem marked to be
// published at their last release (a close that left the file dirty
// without publishing it: atrelease.go).
//
// In sync mode, on backends that take uploads in parts (S3), a file is
// sent in parts while it is being written once 32 MiB of it is written in
// order (eager.go): the commit then sends the parts not sent or changed
// since, and completes the upload under the same condition a Put would
// have. Nothing is visible before the completion; a file never committed
// aborts its parts. Parts that met an unavailable backend fail the commit
// at once (the job is retried whole later) rather than sending the whole
// file to the same silent endpoint; their abort runs in the background. The upload's ID is recorded in the index while it is
// open, so one a crash leaves open is aborted by the next mount
// (orphans.go).
//
// Staged bytes count against the cache size: growing a staging file
// reserves space first, and a full cache is ENOSPC, never a truncation
// (without --cache-size, staged bytes may use the tenth of the disk the
// cache keeps free: cache.Store.ReserveStaging).
// A write session records whether it holds new data (Staging.Dirty), who
// wrote to it (NoteWriter, WrittenBy: the filesystem publishes it only
// at a writer's close) and its first failed write or truncation
// (Staging.Failed, or Fail for a writer killed mid-file), and what the
// file was before it (StartFrom, Previous, passed on to its Job): where
// a failed session leaves the file. Register refuses a failed session,
// which the filesystem keeps aside instead: a write that must not be
// uploaded is kept under failed-writes (kept.go).
//
// The old name of a file deleted or renamed while its upload ran is
// hidden from the namespace until that attempt has ended and taken down
// what landed (hiding.go, Names.Hide).
//
// A committed file's bytes (Content) belong to the manager until its
// upload is complete: the filesystem asks for them by key. The manager
// keeps the namespace (Names, cache/meta) current: a journaled upload
// shows as a local entry, and a completed one becomes the bucket's entry
// before the content is let go, so no reader finds neither. A rename
// moves pending uploads to the new key (Rekey) and is journaled
// (BeginMove); the next mount finishes a rename a crash cut short before
// any upload starts (moves.go). docs/design-write-path.md draws it all.
//
// A journal entry and its staged file end in two steps, ordered so that a
// kill -9 between them never leaves an entry whose bytes are nowhere: the
// entry is deleted first when the bytes are done with (a completed upload,
// a dropped job: the next mount removes a staging file no entry owns), and
// last when the bytes move to failed-writes (the next mount finds them
// there). crashpoint.go marks the points in between for the tests.
//
// Lock order: Manager.mu, then the namespace's (in-memory
// SetLocal/ClearLocal/Hide). Staging.mu and eagerUpload.mu are leaves, never
// taken with Manager.mu held; eagerUpload.mu is held for bookkeeping
// only (its sends, begin and abort run unlocked, in goroutines). Manager.mu is not held across an upload, a bucket call, a
// staging-file fsync, Adopt or a synced journal append (appendUpload: a
// commit's, whose Register holds it for bookkeeping only and whose
// Journal does the I/O unlocked; a renamed running upload's old-name
// entry, which Rekey appends after unlocking; a take-down's). Known exception: rewriting or deleting a journal entry (a
// badger write, not synced: retry state in finish and Retry, Rekey,
// dropLocked, and Discard's of an older upload it stops), removing a
// dropped staging file, and Discard's move of a staged file to
// failed-writes happen under Manager.mu. Discard waits for the uploads it
// stopped with no lock held.
package writeback
