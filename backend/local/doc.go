// Package local serves a directory as a backend.Backend: file:///path
// sources on local disk, NFS or Lustre. It owns the mapping from keys to
// paths, the S3-style listing emulation and atomic writes into the tree.
//
// Keys are slash-separated paths relative to the root. A key with an empty,
// "." or ".." segment, a leading or trailing "/", or a NUL byte cannot name
// a file here: reads report it as ErrNotExist, writes as ErrInvalidKey
// (which also matches backend.ErrNotSupported). All file system access goes
// through os.Root, so no key and no symbolic link reaches outside the root;
// links that stay inside it are followed. Directories are prefixes, and a
// key cannot be both a file and a prefix; a directory also plays the part
// of an object store's "dir/" marker (dirs.go): a Put of one is a mkdir, a
// recursive listing shows an empty directory as one, Copy and Delete take
// one (so that a directory rename moves empty directories too and leaves
// nothing under the old name).
//
// Version is a fingerprint of size, modification time (ns) and inode. The
// device number is left out on purpose: NFS may renumber it on remount, and
// the cache must survive that. ReadRange checks the version when it opens
// the file and again, with fstat, before it hands out the last byte of the
// range: a file modified in place during a read fails with
// backend.ErrVersionChanged instead of returning mixed bytes. A file
// replaced by rename during a read is not an error: the open descriptor
// still reads the version that was asked for.
//
// List emulates a delimiter listing: entries in byte order of their keys
// (a directory "d" sorts as "d/"), tokens are the last key returned
// (start-after), Recursive walks the tree depth-first in key order and
// follows in-root links to directories, skipping loops. Empty directories
// are listed as prefixes (a POSIX tree has them), and as "dir/" markers by
// a recursive listing; Delete removes the parents it leaves empty so that
// a deleted key's prefix goes away as it does on S3, and a failed Put the
// directories it made. Temporary upload files (".strata-tmp-*") are never
// listed.
//
// Put writes a temporary file in the key's directory, fsyncs it, then
// renames it over the key and fsyncs the directory: readers see the old
// object or the new one, never a part. VersionAbsent uses link(2), which
// fails if the key exists, so it holds across processes; IfVersion with a
// version is checked under a per-key lock and holds within this process.
//
// Lock order: keyLocks (one striped mutex per key, held only across the
// stat-and-rename that commits a write: metadata, never data I/O), then
// dirCache.mu (map operations only, no I/O). No lock is held while data is
// read or written.
package local
