// Package fs is the FUSE face of Strata: go-fuse nodes and handles for
// directories and files, the errno table, and mounting with the kernel
// settings that matter for throughput. It imports no cloud SDK; bytes come
// through prefetch and cache, names through cache/meta.
//
// Identity: a directory node is its key prefix; a file node is one version
// of one key (its inode number hashes key and version; a file written here
// keeps its node's number through renames and after its upload, while the
// node stands for the key, so a lookup finds the same inode: fileIno, which
// asks the node tracked for the key and the directory's child of the name).
// A renamed node keeps its number, so a new node at its old key (and, for
// a file, version) gets another one while the kernel holds the renamed
// node (inos.go); a renamed directory keeps its number once the kernel
// forgot it too, while the name stands (movedInos.dirs), and a lookup
// answers with the attributes of the node the kernel has under the
// number, which go-fuse keeps in place of the one a lookup makes (a file
// being written is larger than its entry says). When an object changes
// in the bucket, the next lookup after the metadata TTL (or after
// Refresh, which also invalidates the kernel's entry, and which the first
// read that finds the change runs under a finite TTL: lookUpStale)
// returns a new inode, so the page cache, FOPEN_KEEP_CACHE and passthrough state of the
// old version never serve the new one, and handles opened on the old
// version keep reading exactly the bytes they opened. A node's own version
// changes only through the node (its upload landing, a rename copying
// it), and every handle of it follows (fileHandle.readBucketCopy), as every
// descriptor of a local file reads what was written through another: a
// database reads back the pages it just synced. The kernel keeps an
// entry for what is left of the TTL of the metadata it came from
// (meta.Cache.LookupLease, FS.entryTimeout), never a whole TTL from now.
//
// Read path per open: a fully cached (and verified) object gets a FUSE
// passthrough handle on its cache file, so the kernel reads the NVMe copy
// itself; anything else gets a userspace handle served by a
// prefetch.Reader. The kernel cannot mix the two on one inode, so the
// choice is made per inode: while any passthrough handle is open every
// open is passthrough, and while any userspace handle is open none is.
// A writer opened while passthrough handles are open, and every open
// after it until they are gone, is a shadowHandle (shadow.go): it names
// the kernel's backing file, as the kernel requires, with FOPEN_DIRECT_IO,
// so that its reads and writes still come to the daemon; its appends are
// also written to the readers' cache file, past the version it holds, so
// that they see the file grow (follow.go: `tail -f`).
// A file written here and committed (its upload pending, or landed and
// still becoming the cached copy) is passthrough too, on its staging file
// (a committed file never changes); an open right after a writer's close
// waits, with no lock held and briefly, for the writer's RELEASE (close()
// returns before the daemon sees it).
// Cache files are registered with the kernel through a Backing (backing.go:
// the server's own descriptor, or the CSI plugin for a sidecar), behind a
// cache of idle registrations (backingreuse.go) so that reopening a small
// file does not register it again.
//
// Write path: a written file's content is a session (a staging file in
// cache/writeback) shared by all its write handles, held with the rest of
// the node's write-side state in a writeState made at its first write
// (writestate.go): a node only ever read, most of a dataset's, has none. A close publishes it
// only when the closing process wrote to it since the last upload and is
// not dying of a signal (owner.go says how processes are told apart).
// Whether a session holds new data, who wrote to it, whether a write of
// it failed and what the file was before it is the session's own record
// (writeback.Staging: Dirty, WrittenBy, Failed, Previous; fs keeps no
// copy); a session with a failed write is never uploaded (Register
// refuses it) and is kept aside, and the file goes back to Previous. Once
// committed, the content belongs to the writeback manager, found by key:
// reads ask it (Manager.Content) until the upload is complete (a node
// whose name an unlink or a rename took reads what it held then, or the
// version its own upload created, never the name's new content:
// fileNode.content, refresh), and the
// manager, not fs, moves the namespace (cache/meta) from the local entry
// to the bucket's version, before it lets go of the content. Nothing below
// fs calls back into it. Create, mkdir, unlink, rmdir and rename map onto
// the bucket here (namespace.go, rename.go): a rename is journaled
// (Manager.BeginMove) and moves a file's pending uploads (Manager.Rekey)
// or copies and deletes its objects (so too for a file still being written
// by passthrough whose fsync uploaded all it holds: its session moves
// along, based on the copy, renamesynced.go). docs/design-write-path.md
// draws the whole path. With --upload async a new file is written by the kernel
// straight into its staging file (ptwrite.go: every open of it is then a
// passthrough handle on that file, every close journals it as a held live
// commit, the last release lets it go; the cache disk's free space is
// watched in place of the writes the daemon no longer sees). Holds are
// let go by key (Manager.Unhold), and only by the node whose name it is
// (unholdName): the last close of a file whose name went lets go nothing,
// since what is held under the name is another file's.
//
// Lock order, outermost first:
//
//	liveWrite.mu -> writeState.sessMu -> fileNode.mu -> writeback.Manager.mu -> meta.Cache.mu
//	ptWriters.mu: a leaf
//	Staging.mu: a leaf (taken under the node locks, never with Manager.mu)
//	FS.mu: a leaf (no other lock is taken while it is held; it is taken
//	with a node's sessMu held in moveLocal, and with its mu held in
//	trackLocal)
//	reusedBacking.mu: a leaf, held across no syscall
//	backingHolds.mu: a leaf, taken with a node's mu held (backingFreeLocked,
//	awaitBackingFreeLocked, which releases n.mu while it waits)
//	and inside go-fuse's backing lock (kernelCalls, PassthroughFd)
//	movedInos.mu: a leaf
//	fileHandle.swapMu -> fileNode.mu (standsFor, acquireCurrent's refresh)
//
// fileHandle.swapMu is the one lock held across I/O on the read side: shared
// across a read of the handle's cache reader (it keeps the version that
// reader reads from being released under it), exclusively while the
// handle moves to its node's new version (acquireCurrent, which may look
// the name up in the bucket). Only reads of that handle wait on it, and
// they need the new version anyway.
//
// liveWrite.mu orders the commits of one passthrough write session (its
// closes and last release) and is held across their fsync and journal
// append; only that session's own closes wait on it.
// fileNode.mu is held for bookkeeping only, never across I/O. sessMu is
// held shared across a write, read or truncation of the session's staging
// file (a write's space reservation may run a cache eviction pass), or a
// read of the manager's content, and across a write's copy to the
// readers' cache file beside it (follow.go), so that a commit, which holds
// it exclusively, waits for those in flight (as the end of a shadow does,
// for an instant, before it cuts that cache file back). Held exclusively it covers
// bookkeeping and Manager.Register (a dup, no disk I/O), and in a rename
// (moveLocal; rebaseSynced, under the session's liveWrite.mu)
// Manager.Rekey, which rewrites journal entries in the index under
// Manager.mu. A new session is staged (a copy of the pending
// content, or a bucket fetch) with no lock held, then installed. A
// commit's journal append and fsync, uploads and every bucket call run
// with no fs lock. A file whose name went (markUnlinked) keeps its session
// for its descriptors, orphaned (Staging.Orphan, under fileNode.mu: the
// name is no longer being written as far as the manager knows), until the
// last of them is released (discardIfGone). Without a session, it keeps
// what holds its bytes for them until then: the pending upload's content
// (orphan, past orphanGrace only while descriptors are open), or the
// cached copy of its bucket version (gonePin, acquired with no lock held,
// then installed under fileNode.mu).
package fs
