// Package shared is Strata's second cache tier: a backend.Backend that sits
// between the block fetcher and the origin and keeps the blocks it fetches
// in an S3-compatible bucket every node of a cluster can read (an S3
// Express One Zone directory bucket in the nodes' zone, or an in-cluster
// MinIO). A node whose local cache is cold then reads the dataset from the
// shared bucket, and the origin serves each block once per cluster rather
// than once per node.
//
// It owns the key scheme and the record format of the shared objects
// (key.go, record.go, seal.go), the read path that tries the tier before the origin
// (reader.go, lookup.go), the background writer that fills the tier (writer.go,
// assemble.go), the circuit breaker that takes a down or slow tier out of
// the read path (breaker.go), the per-tier counters (stats.go) and the S3
// client settings and mount-time check of the tier (s3.go).
//
// # Keys and records
//
// A block's bytes are fully named by (source, key, version, block size,
// block index): the origin's identity (backend.String()), the object key,
// its version (ETag, GCS generation, local fingerprint) and the position
// of the block. Consecutive blocks are grouped into one shared object of
// GroupSize bytes (one block per object at the default 1 MiB block size);
// the object of group g of an object is named
//
//	PREFIX strata1/<hex(sha256(source))[:16]>/<hex(identity)[:32]>/b<block size>-g<blocks per group>/<g, 10 digits>
//
// where identity = sha256 over the source, key and version. Every part of
// the name that could change the bytes is in it, so shared objects are
// immutable: a changed object has a new version and therefore new names,
// and no reader can ever be served an entry of another version. Old
// entries are left to a bucket lifecycle rule.
//
// A shared object is the concatenation of one record per block of the
// group, each a 64-byte header (magic, block size, group size, block
// index, data length, CRC32C of the data, the full 32-byte identity)
// followed by the block's bytes. Records have a fixed stride (64 + block
// size), so a read of blocks j..k of a group is one ranged GET, and every
// record is checked on its own: a record whose header does not match what
// was asked for (a foreign or misplaced entry), whose CRC32C fails, or
// that is cut short, is a miss: counted, logged once per shared object,
// and refetched from the origin, which also rewrites it.
//
// These checks catch corrupt, truncated, stale and misplaced entries, not
// a deliberate forgery: whoever can write the tier bucket can compute an
// identity and the CRC32C of other bytes. With Options.Key (the mount's
// --shared-cache-key-file) every record is signed (seal.go): the header
// holds, in place of the identity, an HMAC-SHA256 under the key over the
// header fields, the identity and the data, and its magic says so. A
// record whose bytes are intact but whose signature does not verify, or
// that is not signed, is a forged entry: a miss like any bad entry, also
// counted in ForgedEntries and logged as refused. Signed entries live
// under PREFIX strata1/key-<tag>/, tag a hash of the key, so tiers with
// different keys or none (and entries of older versions, all unsigned)
// never read or overwrite each other's entries: to a signed tier they
// are misses.
//
// # Reads
//
// ReadRange splits the requested blocks by group, looks up to Lookahead
// groups up at once (ranged GETs; a 404 is a miss), and streams: each
// tier block is read whole into the caller's buffer when it is large
// enough (the fetcher always passes whole blocks), else into one block
// buffer, checked, then handed over; consecutive misses become one origin
// GET whose bytes go straight to the caller and, when the writer has
// room, into a copy for the tier. Tier requests are bounded by Timeout
// (headers, and each record's body) and are not retried: a slow or failing
// tier costs a read one Timeout, after which that read takes the rest from
// the origin; BreakerThreshold consecutive failures open the breaker, and
// reads go straight to the origin until a probe succeeds after the
// cooldown. No tier failure is ever returned to the caller; origin errors
// are returned as the origin gave them.
//
// # Writes
//
// Blocks fetched from the origin are written to the tier in the
// background by WriteConcurrency workers, from copies held in a budget of
// WriteBuffer bytes. When the budget or the queue is full, the write is
// dropped (counted), never waited for. With more than one block per group
// the assembler holds the blocks of a group until it is complete; a group
// idle for IdleFlush whose end might be the object's end is resolved with
// one origin Stat, other partial groups are dropped.
//
// # Locks
//
// breaker.mu, writer.mu, assembler.mu and Tier.badMu are leaves: none is
// held while taking another, and none across I/O (writer.mu covers only a
// non-blocking send on the job queue). A reader is used by one goroutine;
// its lookups run in goroutines that hand their result over by closing a
// channel.
package shared
