// Package index is Strata's durable metadata: a badger database in the
// cache directory holding, for each cached object version, its identity
// and size (ObjectRecord) and one small key per present block (BlockInfo:
// CRC32C and length); for each source, the current version of each key;
// directory listings and point lookups with the time they were fetched;
// and the upload journal of the write path.
//
// The index is the durable copy, not the hot path: callers keep what they
// need in memory and write through. Every write is one badger transaction
// or write batch; badger serialises what it must. The one Go lock is
// Index.seqMu, a leaf: the journal's sequence number is read and
// incremented in one transaction, and the database runs without conflict
// detection, so that step is made one at a time (two concurrent commits
// once took the same number, and one upload's entry replaced the
// other's). Records have a versioned binary encoding (records.go) that rejects
// anything malformed with ErrCorrupt instead of panicking.
//
// Key space (one byte of kind first; srcTag is 8 bytes of SHA-256(source)):
//
//	"!format"                      cache-dir format and block size
//	'o' id(32)                     ObjectRecord
//	'b' id(32) block(4, BE)        BlockInfo (presence of one block)
//	'k' srcTag key                 id of the version last seen for key
//	'd' srcTag dirPrefix           DirRecord (a listing's header)
//	'e' srcTag dirPrefix 0x00 name EntryRecord (one listing entry)
//	's' srcTag key                 EntryRecord of a point lookup
//	'u' seq(8, BE)                 upload journal entry
//	'm' seq(8, BE)                 journaled rename in the bucket (MoveRecord)
//	'p' seq(8, BE)                 multipart upload begun before its commit (PartsRecord)
package index
