// Package cache is Strata's block cache on local disk: one sparse file per
// object version under <cache-dir>/objects/ab/<id>, named by a hash of
// (source, key, version) and never by the key, so no key can escape the
// cache directory. Block i of an object lives at offset i*BlockSize of its
// file, so a fully cached file can be handed to the kernel as it is (FUSE
// passthrough).
//
// Which blocks are present, and their CRC32C, live in the badger index
// (cache/index). A block is marked present only after its bytes are
// written; blocks found at startup are re-verified against their CRC the
// first time this run reads them, so a torn or flipped block is dropped and
// refetched instead of served. After a clean shutdown they are trusted
// (trust.go), as far as the cache file still holds them: a file missing or
// cut short loses its blocks past its end (filecheck.go). Eviction removes
// least recently used objects (or the tail blocks of a big one, by hole
// punching) when the cache passes its size limit or the disk's free-space
// floor; open objects are pinned and never evicted. Files being written
// (staged for upload) count against the limit, and without --cache-size may
// take the cache past it while the disk has room (ReserveStaging); a pass
// that cannot get back under the limit rests the evictor for a second, as
// every block the read path cannot cache meanwhile kicks it.
//
// Lock order: Store.evictMu, then Store.mu, then objectState.mu; touchMu
// stands alone. evictMu serialises eviction passes and is the one lock
// held across disk I/O on purpose (it is never on a read or write path);
// objectState.mu covers opening a cache file and checking its size (a file
// found short drops its lost blocks under it: an index write, once per
// loss, so that no reader gets the file first). Presence, verification and
// CRCs are atomics read without locks on the read path.
package cache
